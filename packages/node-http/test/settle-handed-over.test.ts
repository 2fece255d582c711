import type { ServerResponse } from 'node:http';
import { Readable } from 'node:stream';
import { settleHandedOver } from '@idem/node-http';
import { afterEach, describe, expect, test } from 'vitest';
import { fakeExecution, listen, send } from './support.js';

let close: (() => Promise<void>) | undefined;
afterEach(async () => {
  await close?.();
  close = undefined;
});

/**
 * A framework's send as Fastify does it: the payload handed over, then written whole (head and end). (Here the
 * headers are set on the response, the source the settlement reads them from; Fastify's is its reply.)
 */
function frameworkSend(
  settlement: ReturnType<typeof settleHandedOver>,
  res: ServerResponse,
  status: number,
  headers: Record<string, string>,
  payload: unknown,
): void {
  settlement.sending(payload);
  try {
    for (const [name, value] of Object.entries(headers)) res.setHeader(name, value);
    res.writeHead(status);
    if (typeof (payload as Readable | undefined)?.pipe === 'function') (payload as Readable).pipe(res);
    else res.end(payload as string | Buffer | undefined);
  } finally {
    settlement.sent();
  }
}

/** One request through `handle`, with a fake execution; resolves what the execution was settled with. */
async function run(handle: (res: ServerResponse, settlement: ReturnType<typeof settleHandedOver>) => void) {
  const fake = fakeExecution(64);
  const { port, close: stop } = await listen((_req, res) => {
    handle(res, settleHandedOver(fake.execution, res, res));
  });
  close = stop;
  const sent = await send(port, {});
  if ('error' in sent) throw sent.error;
  const answer = sent;
  await fake.settled;
  return { fake, answer };
}

describe('settleHandedOver', () => {
  test('a whole answer handed over settles at once with its status, headers and body (a copy of bytes)', async () => {
    const bytes = Buffer.from('{"id":1}');
    const { fake, answer } = await run((res, settlement) =>
      frameworkSend(settlement, res, 201, { 'content-type': 'application/json' }, bytes),
    );
    expect(answer.status).toBe(201);
    expect(fake.finished).toHaveLength(1);
    const [finished] = fake.finished;
    expect(finished?.status).toBe(201);
    expect(finished?.headers['content-type']).toBe('application/json');
    expect(Buffer.from(finished?.body as Uint8Array).toString()).toBe('{"id":1}');
    expect(finished?.body).not.toBe(bytes);
    expect(finished?.bodyTruncated).toBe(false);
  });

  test('a 204 stores no body, whatever was handed over', async () => {
    const { fake } = await run((res, settlement) => frameworkSend(settlement, res, 204, {}, 'ignored'));
    expect(fake.finished[0]).toMatchObject({ status: 204, body: null, bodyTruncated: false });
  });

  test('an empty string is no body', async () => {
    const { fake } = await run((res, settlement) => frameworkSend(settlement, res, 200, {}, ''));
    expect(fake.finished[0]).toMatchObject({ status: 200, body: null, bodyTruncated: false });
  });

  test('a body over the cap is omitted, the status kept', async () => {
    const { fake } = await run((res, settlement) => frameworkSend(settlement, res, 200, {}, 'x'.repeat(65)));
    expect(fake.finished[0]).toMatchObject({ status: 200, body: null, bodyTruncated: true });
  });

  test('a head that fails is not the answer: the one written after it is', async () => {
    const { fake, answer } = await run((res, settlement) => {
      // A header value Node refuses: the head throws, nothing was written.
      expect(() => frameworkSend(settlement, res, 201, { 'x-name': 'résumé ✓' }, 'created')).toThrow();
      res.removeHeader('x-name');
      frameworkSend(settlement, res, 500, {}, 'failed');
    });
    expect(answer.status).toBe(500);
    expect(fake.finished.map((finished) => finished.status)).toEqual([500]);
  });

  test('a stream handed over is captured as it is written', async () => {
    const { fake, answer } = await run((res, settlement) =>
      frameworkSend(settlement, res, 200, { 'content-type': 'text/plain' }, Readable.from(['a ', 'stream'])),
    );
    expect(answer.body).toBe('a stream');
    expect(Buffer.from(fake.finished[0]?.body as Uint8Array).toString()).toBe('a stream');
  });

  test('a head written on the response directly, outside the send, starts a capture of what follows', async () => {
    const { fake } = await run((res) => {
      res.writeHead(201, { 'content-type': 'text/plain' });
      res.write('written ');
      res.end('raw');
    });
    expect(fake.finished[0]).toMatchObject({ status: 201, bodyTruncated: false });
    expect(Buffer.from(fake.finished[0]?.body as Uint8Array).toString()).toBe('written raw');
  });

  test('an answer ended on the response itself, headed implicitly by Node, is stored whole', async () => {
    const { fake, answer } = await run((res) => {
      res.statusCode = 202;
      res.end('implicit');
    });
    expect(answer.body).toBe('implicit');
    expect(fake.finished[0]).toMatchObject({ status: 202, bodyTruncated: false });
    expect(Buffer.from(fake.finished[0]?.body as Uint8Array).toString()).toBe('implicit');
  });

  test('a body written on the response before any head, then its end, is stored whole', async () => {
    const { fake, answer } = await run((res) => {
      res.statusCode = 200;
      res.write('written ');
      res.end('first');
    });
    expect(answer.body).toBe('written first');
    expect(Buffer.from(fake.finished[0]?.body as Uint8Array).toString()).toBe('written first');
  });

  test('an explicit head with a status alone, then the body: stored whole', async () => {
    const { fake } = await run((res) => {
      res.writeHead(200);
      res.end('after the head');
    });
    expect(Buffer.from(fake.finished[0]?.body as Uint8Array).toString()).toBe('after the head');
  });

  test('captureWrites: what the app then writes itself (a hijacked reply) is the answer', async () => {
    const { fake } = await run((res, settlement) => {
      settlement.captureWrites();
      res.statusCode = 200;
      res.write('hijacked ');
      res.end('reply');
    });
    expect(Buffer.from(fake.finished[0]?.body as Uint8Array).toString()).toBe('hijacked reply');
  });
});
