import { openAsBlob } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { callOutcome, createIdempotentFetch } from '@idem/client';
import { describe, expect, test } from 'vitest';
import { form, streamOf } from './support/bodies.js';
import { answer, fast, networkError, ORDERS, type Sent, scriptedFetch } from './support/fake-fetch.js';
import { withHttpServer } from './support/http-server.js';

/** A call that fails once (the answer lost) and then succeeds: what did each attempt send? */
async function twice(
  input: string | Request,
  init: RequestInit,
  options: { maxBufferBytes?: number; attemptTimeoutMs?: number } = {},
) {
  const { fetch, sent } = scriptedFetch(networkError(), answer(201));
  const call = createIdempotentFetch({ fetch, ...fast, ...options })(input, init);
  return { call, sent };
}

describe('bodies that can be sent again go as they are', () => {
  test.each<[string, () => NonNullable<RequestInit['body']>, string]>([
    ['a string', () => 'plain text', 'plain text'],
    ['a Uint8Array', () => new TextEncoder().encode('bytes'), 'bytes'],
    ['an ArrayBuffer', () => new TextEncoder().encode('buffer').buffer, 'buffer'],
    ['URLSearchParams', () => new URLSearchParams({ a: '1', b: '2' }), 'a=1&b=2'],
    ['a Blob', () => new Blob(['blob ', 'parts']), 'blob parts'],
    // Not a body fetch knows: it writes the string of it, and so does every attempt (never the items joined).
    ['an array', () => ['a', 'b'] as never, 'a,b'],
    [
      'a sync generator',
      () =>
        (function* () {
          yield 'x';
        })() as never,
      '[object Generator]',
    ],
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

  test('FormData: encoded once, every attempt sends the same bytes under the same boundary', async () => {
    const { call, sent } = await twice(ORDERS, { method: 'POST', body: form(['name', 'book']) });
    expect((await call).status).toBe(201);
    const [first, second] = sent as [Sent, Sent];
    expect(first.headers.get('content-type')).toMatch(/^multipart\/form-data; boundary=\S+$/);
    expect(second.headers.get('content-type')).toBe(first.headers.get('content-type'));
    expect(second.body).toBe(first.body);
  });

  test.each<[string, () => FormData | URLSearchParams, (body: FormData | URLSearchParams) => void]>([
    ['FormData', () => form(['name', 'book']), (body) => body.set('name', 'pen')],
    ['URLSearchParams', () => new URLSearchParams({ name: 'book' }), (body) => body.set('name', 'pen')],
  ])('a %s the caller changes after the call started does not change a retry', async (_, make, change) => {
    const body = make();
    const { fetch, sent } = scriptedFetch(() => {
      change(body);
      return networkError();
    }, answer(201));
    await createIdempotentFetch({ fetch, ...fast })(ORDERS, { method: 'POST', body });
    const [first, second] = sent.map((s) => s.body);
    expect(first).toContain('book');
    expect(second).toBe(first);
  });

  test('FormData over maxBufferBytes goes once, its content type naming the boundary of the bytes sent', async () => {
    const { call, sent } = await twice(
      ORDERS,
      { method: 'POST', body: form(['file', new File(['x'.repeat(200)], 'big.txt')]) },
      { maxBufferBytes: 64 },
    );
    const error = await call.catch((e: unknown) => e);
    expect(callOutcome(error)).toMatchObject({ attempts: 1, gaveUp: 'one-shot-body' });
    const [only] = sent as [Sent];
    const parsed = await new Response(only.body, {
      headers: { 'content-type': only.headers.get('content-type') ?? '' },
    }).formData();
    expect(await (parsed.get('file') as File).text()).toBe('x'.repeat(200));
  });

  test("a FormData whose file cannot be read rejects with the read's error, and nothing is sent", async () => {
    const dir = await mkdtemp(join(tmpdir(), 'idem-client-'));
    try {
      const path = join(dir, 'upload.txt');
      await writeFile(path, 'before');
      const file = await openAsBlob(path);
      await writeFile(path, 'changed on disk'); // a file Blob is unreadable once its file changed
      const { call, sent } = await twice(ORDERS, { method: 'POST', body: form(['file', file]) });
      await expect(call).rejects.toMatchObject({ name: 'NotReadableError' });
      expect(sent).toHaveLength(0);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  test('FormData on a GET is refused as fetch refuses it, before anything is sent', async () => {
    const { call, sent } = await twice(ORDERS, { method: 'GET', body: form(['a', '1']) });
    await expect(call).rejects.toThrow(TypeError);
    expect(sent).toHaveLength(0);
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

  test('buffering is bounded by attemptTimeoutMs: a stalled stream rejects with a TimeoutError, is cancelled, nothing is sent', async () => {
    const cancelled: unknown[] = [];
    const body = new ReadableStream<Uint8Array>({
      pull: () => new Promise<void>(() => {}),
      cancel: (reason) => {
        cancelled.push(reason);
      },
    });
    const { call, sent } = await twice(ORDERS, { method: 'POST', body, duplex: 'half' } as RequestInit, {
      attemptTimeoutMs: 30,
    });
    const error = await call.catch((e: unknown) => e);
    expect(error).toMatchObject({
      name: 'TimeoutError',
      message: 'Reading the request body took longer than 30 ms',
    });
    expect(cancelled).toEqual([error]);
    expect(sent).toHaveLength(0);
  });

  test('a chunk that is not bytes rejects with a TypeError, the source is closed, and nothing is sent', async () => {
    let closed = false;
    const body = {
      async *[Symbol.asyncIterator]() {
        try {
          yield 42;
        } finally {
          closed = true;
        }
      },
    } as unknown as NonNullable<RequestInit['body']>;
    const { call, sent } = await twice(ORDERS, { method: 'POST', body, duplex: 'half' } as RequestInit);
    await expect(call).rejects.toThrow(/must be bytes or text/);
    expect(closed).toBe(true);
    expect(sent).toHaveLength(0);
  });

  test.each<[string, RequestInit, { attemptTimeoutMs?: number }]>([
    ['', {}, {}],
    [', under a signal', { signal: new AbortController().signal }, {}],
    [', under attemptTimeoutMs', {}, { attemptTimeoutMs: 5_000 }],
  ])(
    'a stream that fails while it is read rejects the call with its error%s, and nothing is sent',
    async (_, more, options) => {
      const failure = new Error('disk read failed');
      let pulls = 0;
      const body = new ReadableStream<Uint8Array>({
        async pull(controller) {
          if (++pulls === 1) controller.enqueue(new TextEncoder().encode('part'));
          else {
            await new Promise((resolve) => setTimeout(resolve, 5));
            controller.error(failure);
          }
        },
      });
      const { call, sent } = await twice(
        ORDERS,
        { method: 'POST', body, duplex: 'half', ...more } as RequestInit,
        options,
      );
      await expect(call).rejects.toBe(failure);
      expect(sent).toHaveLength(0);
    },
  );
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
