import type { ServerResponse } from 'node:http';
import { clientGoneSignal, isResponseGone } from '@idem/node-http';
import { afterEach, describe, expect, test } from 'vitest';
import { listen, next, send, sendAndLeave } from './support.js';

let close: (() => Promise<void>) | undefined;
afterEach(async () => {
  await close?.();
  close = undefined;
});

/** A server that hands each response to the test instead of answering. */
async function responses() {
  const waiting: ((res: ServerResponse) => void)[] = [];
  const server = await listen((_req, res) => waiting.shift()?.(res));
  close = server.close;
  const nextResponse = () => new Promise<ServerResponse>((resolve) => waiting.push(resolve));
  return { port: server.port, nextResponse };
}

describe('isResponseGone', () => {
  test('false while the client is there, true once it left', async () => {
    const { port, nextResponse } = await responses();
    const arrived = nextResponse();
    sendAndLeave(port, arrived);
    const res = await arrived;
    expect(isResponseGone(res)).toBe(false);
    await next(res, 'close');
    expect(isResponseGone(res)).toBe(true);
  });
});

describe('clientGoneSignal', () => {
  test('aborted when the client leaves before the response is complete', async () => {
    const { port, nextResponse } = await responses();
    const arrived = nextResponse();
    sendAndLeave(port, arrived);
    const signal = clientGoneSignal(await arrived);
    expect(signal.aborted).toBe(false);
    await new Promise((resolve) => signal.addEventListener('abort', resolve));
    expect(signal.aborted).toBe(true);
  });

  test('never aborted by a response that finishes', async () => {
    const { port, nextResponse } = await responses();
    const arrived = nextResponse();
    const answered = send(port);
    const res = await arrived;
    const signal = clientGoneSignal(res);
    const closed = next(res, 'close');
    res.end('ok');
    expect(await answered).toMatchObject({ status: 200, body: 'ok' });
    await closed;
    expect(signal.aborted).toBe(false);
  });

  test('aborted already when created after the client left', async () => {
    const { port, nextResponse } = await responses();
    const arrived = nextResponse();
    sendAndLeave(port, arrived);
    const res = await arrived;
    await next(res, 'close');
    expect(clientGoneSignal(res).aborted).toBe(true);
  });
});
