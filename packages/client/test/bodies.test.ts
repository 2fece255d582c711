import { Readable } from 'node:stream';
import { callOutcome, createIdempotentFetch } from '@idem/client';
import { describe, expect, test } from 'vitest';
import { answer, fast, networkError, ORDERS, scriptedFetch } from './support/fake-fetch.js';
import { withHttpServer } from './support/http-server.js';

/** A call that fails once (the answer lost) and then succeeds: what did each attempt send? */
async function twice(input: string | Request, init: RequestInit, options: { maxBufferBytes?: number } = {}) {
  const { fetch, sent } = scriptedFetch(networkError(), answer(201));
  const call = createIdempotentFetch({ fetch, ...fast, ...options })(input, init);
  return { call, sent };
}

const streamOf = (...chunks: string[]) =>
  new ReadableStream<Uint8Array>({
    start(controller) {
      for (const chunk of chunks) controller.enqueue(new TextEncoder().encode(chunk));
      controller.close();
    },
  });

describe('bodies that can be sent again go as they are', () => {
  test.each<[string, () => NonNullable<RequestInit['body']>, string]>([
    ['a string', () => 'plain text', 'plain text'],
    ['a Uint8Array', () => new TextEncoder().encode('bytes'), 'bytes'],
    ['an ArrayBuffer', () => new TextEncoder().encode('buffer').buffer, 'buffer'],
    ['URLSearchParams', () => new URLSearchParams({ a: '1', b: '2' }), 'a=1&b=2'],
    ['a Blob', () => new Blob(['blob ', 'parts']), 'blob parts'],
  ])('%s: every attempt sends the same bytes', async (_, body, text) => {
    const { call, sent } = await twice(ORDERS, { method: 'POST', body: body() });
    expect((await call).status).toBe(201);
    expect(sent.map((s) => s.body)).toEqual([text, text]);
  });

  test('FormData: every attempt sends the same fields', async () => {
    const form = new FormData();
    form.set('name', 'book');
    const { call, sent } = await twice(ORDERS, { method: 'POST', body: form });
    await call;
    for (const attempt of sent) expect(attempt.body).toContain('name="name"\r\n\r\nbook');
  });

  test('bytes the caller changes after the call started do not change a retry', async () => {
    const bytes = new TextEncoder().encode('first');
    const { fetch, sent } = scriptedFetch(() => {
      bytes.set(new TextEncoder().encode('XXXXX'));
      return networkError();
    }, answer(201));
    await createIdempotentFetch({ fetch, ...fast })(ORDERS, { method: 'POST', body: bytes });
    expect(sent.map((s) => s.body)).toEqual(['first', 'first']);
  });
});

describe('one-shot bodies are buffered up to maxBufferBytes, else sent once and not retried', () => {
  test('a ReadableStream within the limit is buffered and retried', async () => {
    const { call, sent } = await twice(ORDERS, {
      method: 'POST',
      body: streamOf('a,', 'b,', 'c'),
      duplex: 'half',
    });
    expect((await call).status).toBe(201);
    expect(sent.map((s) => s.body)).toEqual(['a,b,c', 'a,b,c']);
  });

  test('a Node Readable (an async iterable) within the limit is buffered and retried', async () => {
    const body = Readable.from(['x', 'y', 'z']) as unknown as RequestInit['body'];
    const { call, sent } = await twice(ORDERS, { method: 'POST', body, duplex: 'half' } as RequestInit);
    expect((await call).status).toBe(201);
    expect(sent.map((s) => s.body)).toEqual(['xyz', 'xyz']);
  });

  test('a stream over the limit is sent once, whole, and its network error thrown, not retried', async () => {
    const { call, sent } = await twice(
      ORDERS,
      { method: 'POST', body: streamOf('0123', '4567', '89'), duplex: 'half' },
      { maxBufferBytes: 5 },
    );
    const error = await call.catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TypeError);
    expect(callOutcome(error)).toMatchObject({ attempts: 1, gaveUp: 'one-shot-body' });
    expect(sent.map((s) => s.body)).toEqual(['0123456789']);
  });

  test('a stream over the limit still carries a key, and a final answer comes back as usual', async () => {
    const { fetch, sent } = scriptedFetch(answer(503));
    const response = await createIdempotentFetch({ fetch, ...fast, maxBufferBytes: 0 })(ORDERS, {
      method: 'PUT',
      body: streamOf('data'),
      duplex: 'half',
    } as RequestInit);
    expect(response.status).toBe(503);
    expect(callOutcome(response)?.gaveUp).toBe('one-shot-body');
    expect(sent).toHaveLength(1);
    expect(sent[0]?.headers.get('idempotency-key')).toMatch(/^[0-9a-f-]{36}$/);
  });

  test('a stream that fails while it is read rejects the call with its error, and nothing is sent', async () => {
    const failure = new Error('disk read failed');
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(new TextEncoder().encode('part'));
        controller.error(failure);
      },
    });
    const { call, sent } = await twice(ORDERS, { method: 'POST', body, duplex: 'half' } as RequestInit);
    await expect(call).rejects.toBe(failure);
    expect(sent).toHaveLength(0);
  });
});

describe('a Request as input', () => {
  test('its body is read from a clone: retried, and the caller can send the same Request again', async () => {
    const request = new Request(ORDERS, {
      method: 'POST',
      body: '{"n":1}',
      headers: { 'content-type': 'application/json', 'x-trace': 't' },
    });
    const { fetch, sent } = scriptedFetch(networkError(), answer(201));
    const idempotentFetch = createIdempotentFetch({ fetch, ...fast });
    expect((await idempotentFetch(request)).status).toBe(201);
    expect(request.bodyUsed).toBe(false);
    expect((await idempotentFetch(request)).status).toBe(201);
    expect(sent.map((s) => s.body)).toEqual(['{"n":1}', '{"n":1}', '{"n":1}']);
    expect(sent.map((s) => s.headers.get('x-trace'))).toEqual(['t', 't', 't']);
    const [first, second, third] = sent.map((s) => s.headers.get('idempotency-key'));
    expect(second).toBe(first);
    expect(third).not.toBe(first); // a second call is a second operation: a new key
  });

  test('init overrides the Request, as in fetch: method, headers and body', async () => {
    const request = new Request(ORDERS, { method: 'PUT', body: 'old', headers: { 'x-a': '1' } });
    const { call, sent } = await twice(request, { method: 'POST', body: 'new', headers: { 'x-b': '2' } });
    await call;
    expect(sent.map((s) => [s.method, s.body, s.headers.get('x-a'), s.headers.get('x-b')])).toEqual([
      ['POST', 'new', null, '2'],
      ['POST', 'new', null, '2'],
    ]);
  });

  test('a Request whose body is over the limit goes once with its own body', async () => {
    const request = new Request(ORDERS, { method: 'POST', body: 'x'.repeat(100) });
    const { call, sent } = await twice(request, {}, { maxBufferBytes: 10 });
    await expect(call).rejects.toThrow(TypeError);
    expect(sent.map((s) => s.body)).toEqual(['x'.repeat(100)]);
  });

  test('a used Request is refused as fetch refuses it, before anything is sent', async () => {
    const request = new Request(ORDERS, { method: 'POST', body: 'once' });
    await request.text();
    const { call, sent } = await twice(request, {});
    await expect(call).rejects.toThrow(TypeError);
    expect(sent).toHaveLength(0);
  });
});

test('over a real connection: a buffered stream reaches the server whole on every attempt', async () => {
  const bodies: string[] = [];
  await withHttpServer(
    (req, res, body) => {
      bodies.push(body.toString());
      if (bodies.length === 1) req.socket.destroy();
      else res.writeHead(201).end();
    },
    async (url) => {
      const response = await createIdempotentFetch(fast)(`${url}/files/1`, {
        method: 'PUT',
        body: streamOf('chunk-1,', 'chunk-2'),
        duplex: 'half',
      } as RequestInit);
      expect(response.status).toBe(201);
    },
  );
  expect(bodies).toEqual(['chunk-1,chunk-2', 'chunk-1,chunk-2']);
});

test('over a real connection: a stream over the limit that fails while it is sent is thrown, never retried', async () => {
  let requests = 0;
  await withHttpServer(
    () => {
      requests++;
    },
    async (url) => {
      const failure = new Error('source gone');
      let pulls = 0;
      const body = new ReadableStream<Uint8Array>({
        pull(controller) {
          if (++pulls > 3) controller.error(failure);
          else controller.enqueue(new Uint8Array(64));
        },
      });
      const call = createIdempotentFetch({ ...fast, maxBufferBytes: 100 })(`${url}/files/1`, {
        method: 'PUT',
        body,
        duplex: 'half',
      } as RequestInit);
      const error = await call.catch((e: unknown) => e);
      expect(error).toBeInstanceOf(TypeError); // fetch's network error, its cause the stream's
      expect(callOutcome(error)).toMatchObject({ attempts: 1, gaveUp: 'one-shot-body' });
    },
  );
  expect(requests).toBeLessThanOrEqual(1);
});
