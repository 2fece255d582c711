import type { ServerResponse } from 'node:http';
import { settleOnResponse } from '@idem/node-http';
import { afterEach, describe, expect, test } from 'vitest';
import { deferred, fakeExecution, type Handler, listen, next, send, sendAndLeave } from './support.js';

let close: (() => Promise<void>) | undefined;
afterEach(async () => {
  await close?.();
  close = undefined;
});

/** A server whose every response is settled on `execution` before `handler` writes it. */
async function serve(fake: ReturnType<typeof fakeExecution>, handler: Handler) {
  const server = await listen((req, res) => {
    settleOnResponse(fake.execution, res);
    return handler(req, res);
  });
  close = server.close;
  return server.port;
}

describe('settleOnResponse', () => {
  test('a response that ends: finish with its status, headers and bytes', async () => {
    const fake = fakeExecution();
    const port = await serve(fake, (_req, res) => {
      res.setHeader('location', '/orders/1');
      res.writeHead(201, { 'Content-Type': 'text/plain' });
      res.write('hel');
      res.end(Buffer.from('lo'));
    });
    const answer = await send(port);
    expect(answer).toMatchObject({ status: 201, body: 'hello' });
    expect(await fake.settled).toBe('finish');
    const [captured] = fake.finished;
    expect(captured).toMatchObject({ status: 201, bodyTruncated: false, contentEncoding: undefined });
    expect(captured?.headers).toMatchObject({ location: '/orders/1', 'content-type': 'text/plain' });
    expect(Buffer.from(captured?.body ?? '').toString()).toBe('hello');
    expect(fake.aborts).toBe(0);
  });

  test('the status as it went out on the status line, even when changed after', async () => {
    const fake = fakeExecution();
    const port = await serve(fake, (_req, res) => {
      res.writeHead(202);
      res.statusCode = 500;
      res.end('ok');
    });
    expect(await send(port)).toMatchObject({ status: 202 });
    await fake.settled;
    expect(fake.finished[0]?.status).toBe(202);
  });

  test('a body over maxBodyBytes: finish with the status and headers, without the body', async () => {
    const fake = fakeExecution(4);
    const port = await serve(fake, (_req, res) => res.end('more than four bytes'));
    expect(await send(port)).toMatchObject({ status: 200, body: 'more than four bytes' });
    await fake.settled;
    expect(fake.finished[0]).toMatchObject({ status: 200, body: null, bodyTruncated: true });
  });

  test('destroyed by the server before any status: abort, the key is released', async () => {
    const fake = fakeExecution();
    const port = await serve(fake, (_req, res) => res.destroy());
    expect(await send(port)).toHaveProperty('error');
    expect(await fake.settled).toBe('abort');
    expect(fake.aborts).toBe(1);
    expect(fake.finished).toEqual([]);
  });

  test('destroyed after the status line, before the end: finish with the status and no body', async () => {
    const fake = fakeExecution();
    const port = await serve(fake, async (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.flushHeaders();
      res.write('first,');
      await new Promise((resolve) => setTimeout(resolve, 20));
      res.destroy();
    });
    await send(port);
    expect(await fake.settled).toBe('finish');
    expect(fake.finished[0]).toMatchObject({ status: 200, body: null, bodyTruncated: true });
    expect(fake.aborts).toBe(0);
  });

  test('destroyed after the end: the finished answer stands, nothing is settled twice', async () => {
    const fake = fakeExecution();
    const port = await serve(fake, (_req, res) => {
      res.end('done');
      res.destroy();
    });
    await send(port);
    expect(await fake.settled).toBe('finish');
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(fake.finished).toHaveLength(1);
    expect(fake.finished[0]).toMatchObject({ status: 200, bodyTruncated: false });
    expect(fake.aborts).toBe(0);
  });

  test('the client leaves before any status: nothing is decided until the handler answers', async () => {
    const fake = fakeExecution();
    const arrived = deferred<ServerResponse>();
    const port = await serve(fake, (_req, res) => arrived.resolve(res));
    sendAndLeave(port, arrived.promise);
    const res = await arrived.promise;
    await next(res, 'close');
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(fake.finished).toEqual([]);
    expect(fake.aborts).toBe(0);
    // The handler answers after all, to nobody: the work is done, and its answer settles the key.
    res.statusCode = 201;
    res.end('late');
    expect(await fake.settled).toBe('finish');
    expect(fake.finished[0]).toMatchObject({ status: 201 });
  });

  test('the Content-Encoding handed to writeHead (in the raw form too) is what the bytes are', async () => {
    const fake = fakeExecution();
    const port = await serve(fake, (_req, res) => {
      res.writeHead(200, ['Content-Encoding', 'br', 'X-Other', '1']);
      res.end('x');
    });
    await send(port);
    await fake.settled;
    expect(fake.finished[0]?.contentEncoding).toBe('br');
    expect(fake.finished[0]?.headers).toMatchObject({ 'content-encoding': 'br', 'x-other': '1' });
  });
});
