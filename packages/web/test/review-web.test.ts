import { stores } from '@idem/adapter-suite';
import type { IdempotencyStore } from '@idem/core';
import { createMemoryStore } from '@idem/store-memory';
import { executionOf, pathAndQuery, withIdempotency } from '@idem/web';
import { v7 } from 'uuid';
import { describe, expect, test } from 'vitest';

/** What a `Response` takes as its body (not a global type without the DOM lib). */
type BodyInit = NonNullable<ConstructorParameters<typeof Response>[0]>;

// Driven with Node's own Web APIs and no server (as a Worker, Deno or Bun would call the handler).

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const post = (
  key: string | undefined,
  body: BodyInit | null = '{"a":1}',
  init: RequestInit = {},
  url = 'https://api.example/orders',
) =>
  new Request(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(key === undefined ? {} : { 'idempotency-key': key }) },
    body,
    ...init,
  });

/** A body's bytes as a server writes them (a string chunk as its UTF-8), in hex. */
async function bytesOf(response: Response): Promise<string> {
  if (response.body === null) return '';
  const parts: Buffer[] = [];
  for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array | string>)
    parts.push(Buffer.from(chunk));
  return Buffer.concat(parts).toString('hex');
}

async function stateOf(store: IdempotencyStore, key: string): Promise<string | undefined> {
  const record = await store.load({ scope: '', key });
  if (record === undefined) return undefined;
  return record.response === null ? 'in-flight' : 'completed';
}

describe('review: a client that stops reading the answer', () => {
  test('the client cancels an endless body: the source is cancelled and the key does not stay in flight', async () => {
    const store = createMemoryStore({ sweepIntervalMs: false });
    let cancelled = false;
    let pulls = 0;
    const handler = withIdempotency(
      () =>
        new Response(
          new ReadableStream<Uint8Array>({
            async pull(controller) {
              pulls++;
              await sleep(5);
              controller.enqueue(new TextEncoder().encode(': keep-alive\n\n'));
            },
            cancel() {
              cancelled = true;
            },
          }),
          { headers: { 'content-type': 'text/event-stream' } },
        ),
      { store, leaseMs: 150, heartbeatIntervalMs: 50 },
    );
    const key = v7();
    const response = await handler(post(key));
    const reader = (response.body as ReadableStream<Uint8Array>).getReader();
    await reader.read();
    // The runtime does this when the client goes away (without awaiting it: with the tee, the promise of one
    // branch's cancel settles only once the other branch is cancelled too, i.e. never here).
    const cancelling = reader.cancel();
    await sleep(300);
    const pullsThen = pulls;
    await sleep(100);
    expect({ cancelled, stillPulling: pulls > pullsThen, state: await stateOf(store, key) }).toEqual({
      cancelled: true,
      stillPulling: false,
      state: expect.not.stringMatching(/in-flight/) as unknown as string,
    });
    expect(
      await Promise.race([cancelling.then(() => 'cancelled'), sleep(100).then(() => 'still pending')]),
    ).toBe('cancelled');
  });

  test('control: without the wrapper, cancelling the body cancels the source', async () => {
    let cancelled = false;
    const response = new Response(
      new ReadableStream<Uint8Array>({
        pull: (controller) => controller.enqueue(new Uint8Array([1])),
        cancel() {
          cancelled = true;
        },
      }),
    );
    const reader = (response.body as ReadableStream<Uint8Array>).getReader();
    await reader.read();
    await reader.cancel();
    expect(cancelled).toBe(true);
  });
});

describe('review: handler answers that are not a usable Response', () => {
  test('a Response whose body was already read: the key is released, not renewed for ever', async () => {
    const store = createMemoryStore({ sweepIntervalMs: false });
    const handler = withIdempotency(
      async () => {
        const upstream = new Response('logged');
        await upstream.text();
        return upstream;
      },
      { store, leaseMs: 150, heartbeatIntervalMs: 50 },
    );
    const key = v7();
    await handler(post(key)).catch(() => undefined);
    await sleep(300);
    expect(await stateOf(store, key)).toBeUndefined();
  });

  test('a handler (plain JS) that resolves to undefined: the key is released, not renewed for ever', async () => {
    const store = createMemoryStore({ sweepIntervalMs: false });
    const handler = withIdempotency((() => undefined) as unknown as () => Response, {
      store,
      leaseMs: 150,
      heartbeatIntervalMs: 50,
    });
    const key = v7();
    await handler(post(key)).catch(() => undefined);
    await sleep(300);
    expect(await stateOf(store, key)).toBeUndefined();
  });
});

describe('review: body kinds a handler can answer with (first answer == replay)', () => {
  const kinds: Record<string, () => Response> = {
    string: () => new Response('text é', { status: 201 }),
    Uint8Array: () => new Response(new Uint8Array([0, 255, 1])),
    ArrayBuffer: () => new Response(new Uint8Array([7, 7]).buffer),
    DataView: () => new Response(new DataView(new Uint8Array([1, 2, 3, 4]).buffer, 1, 2)),
    Float64Array: () => new Response(new Float64Array([1.5])),
    Blob: () => new Response(new Blob(['b'], { type: 'image/x-b' })),
    FormData: () => {
      const form = new FormData();
      form.append('a', '1');
      return new Response(form);
    },
    URLSearchParams: () => new Response(new URLSearchParams('a=1&b=2')),
    'stream of bytes': () => new Response(ReadableStream.from([new Uint8Array([65]), new Uint8Array([66])])),
    'stream of strings': () => new Response(ReadableStream.from(['a', 'é']) as unknown as ReadableStream),
    'null body': () => new Response(null, { status: 202 }),
    '204': () => new Response(null, { status: 204 }),
    '304 with etag': () => new Response(null, { status: 304, headers: { etag: '"e"' } }),
    'Response.json': () => Response.json({ a: [1] }, { status: 201, headers: { location: '/a/1' } }),
    'Response.redirect': () => Response.redirect('https://example.com/there', 307),
  };
  for (const [name, make] of Object.entries(kinds)) {
    test(`${name}: status, content-type, location and bytes`, async () => {
      const store = createMemoryStore({ sweepIntervalMs: false });
      let runs = 0;
      const handler = withIdempotency(
        () => {
          runs++;
          return make();
        },
        { store },
      );
      const key = v7();
      const first = await handler(post(key));
      const firstBytes = await bytesOf(first);
      await sleep(10);
      expect(await stateOf(store, key)).toBe('completed');
      const again = await handler(post(key));
      expect(again.headers.get('idempotent-replayed')).toBe('true');
      expect({
        status: again.status,
        type: again.headers.get('content-type'),
        location: again.headers.get('location'),
        bytes: await bytesOf(again),
      }).toEqual({
        status: first.status,
        type: first.headers.get('content-type'),
        location: first.headers.get('location'),
        bytes: firstBytes,
      });
      expect(runs).toBe(1);
    });
  }

  test('a Response nobody reads is still settled (finite body)', async () => {
    const store = createMemoryStore({ sweepIntervalMs: false });
    const handler = withIdempotency(
      () => new Response(ReadableStream.from([new Uint8Array([1]), new Uint8Array([2])])),
      { store },
    );
    const key = v7();
    await handler(post(key)); // never read
    await sleep(20);
    expect(await stateOf(store, key)).toBe('completed');
  });

  test('a body that fails before its first chunk: released; after one: stored without its body', async () => {
    const store = createMemoryStore({ sweepIntervalMs: false });
    let mode: 'before' | 'after' = 'before';
    const handler = withIdempotency(
      () =>
        new Response(
          new ReadableStream({
            start(controller) {
              if (mode === 'after') controller.enqueue(new Uint8Array([1]));
              setTimeout(() => controller.error(new Error('broken')), 5);
            },
          }),
          { status: 201 },
        ),
      { store },
    );
    const before = v7();
    await (await handler(post(before))).arrayBuffer().catch(() => undefined);
    await sleep(20);
    expect(await stateOf(store, before)).toBeUndefined();
    mode = 'after';
    const after = v7();
    await (await handler(post(after))).arrayBuffer().catch(() => undefined);
    await sleep(20);
    const replay = await handler(post(after));
    expect([replay.status, replay.headers.get('idempotent-replay-body-omitted')]).toEqual([201, 'true']);
  });
});

describe('review: request identity', () => {
  test('pathAndQuery of a URL without a path whose query holds a slash', () => {
    expect(pathAndQuery('https://api.example?next=/home')).toEqual({ path: '/', query: 'next=/home' });
    expect(pathAndQuery('https://api.example?u=http://x/y')).toEqual({ path: '/', query: 'u=http://x/y' });
  });

  test('pathAndQuery of ordinary URLs', () => {
    expect(pathAndQuery('https://a.example/orders?')).toEqual({ path: '/orders', query: '' });
    expect(pathAndQuery('https://a.example/orders')).toEqual({ path: '/orders', query: undefined });
    expect(pathAndQuery('https://a.example/o%2Fx?a=1#frag?b')).toEqual({ path: '/o%2Fx', query: 'a=1' });
    expect(pathAndQuery('https://a.example')).toEqual({ path: '/', query: undefined });
  });

  test('a non-special-scheme request without a path: "?next=/x" and "/x" are two requests', async () => {
    const handler = withIdempotency((request) => new Response(request.url, { status: 201 }), {
      store: createMemoryStore(),
    });
    const key = v7();
    const first = await handler(post(key, '{}', {}, 'app://host?next=/x'));
    await first.text();
    await sleep(5);
    const second = await handler(post(key, '{}', {}, 'app://host/x'));
    expect(second.status).toBe(422);
  });

  test('repeated key header, a key with inner space, a long path: refused or handled, never a crash', async () => {
    let runs = 0;
    const handler = withIdempotency(
      () => {
        runs++;
        return new Response('ok', { status: 201 });
      },
      { store: createMemoryStore(), keyFormat: 'token' },
    );
    const twice = new Headers({ 'content-type': 'application/json' });
    twice.append('idempotency-key', 'abc');
    twice.append('idempotency-key', 'abc');
    expect(
      (await handler(new Request('https://a.example/o', { method: 'POST', headers: twice, body: '{}' })))
        .status,
    ).toBe(400);
    expect((await handler(post('a b'))).status).toBe(400);
    const long = `https://a.example/${'x'.repeat(100_000)}`;
    const res = await handler(post('long-key', '{}', {}, long));
    expect([201, 400]).toContain(res.status);
    expect(runs).toBe(1); // only the long path ran: the refused keys never reached the handler
  });

  test('chunked (stream) body and content-length 0: empty both ways, one request', async () => {
    const handler = withIdempotency(() => new Response('ok', { status: 201 }), {
      store: createMemoryStore(),
    });
    const key = v7();
    const first = await handler(
      post(key, new ReadableStream({ start: (c) => c.close() }), { duplex: 'half' } as RequestInit),
    );
    await first.text();
    await sleep(5);
    const second = await handler(
      post(key, null, {
        headers: { 'content-type': 'application/json', 'idempotency-key': key, 'content-length': '0' },
      }),
    );
    expect(second.headers.get('idempotent-replayed')).toBe('true');
  });
});

describe('review: options', () => {
  test('reserveIn: "transaction": the handler gets a pending execution it can reserve with', async () => {
    let runs = 0;
    const states: string[] = [];
    const handler = withIdempotency(
      (request) => {
        runs++;
        const execution = executionOf(request);
        states.push(`${execution?.lifecycle}:${execution?.state}`);
        return new Response('ok', { status: 201 });
      },
      { store: createMemoryStore(), reserveIn: 'transaction' },
    );
    const key = v7();
    await (await handler(post(key))).text();
    await sleep(5);
    await (await handler(post(key))).text();
    // A handler that never calls reserveWith runs every time: nothing is ever reserved or stored.
    expect(states[0]).toBe('transactional:pending');
    expect(runs).toBe(2);
  });

  test('scope that throws: the wrapper rejects, nothing is reserved', async () => {
    const store = createMemoryStore({ sweepIntervalMs: false });
    const handler = withIdempotency(() => new Response('ok'), {
      store,
      scope: () => {
        throw new Error('no principal');
      },
    });
    const key = v7();
    await expect(handler(post(key))).rejects.toThrow('no principal');
    expect(await stateOf(store, key)).toBeUndefined();
  });

  test('wait strategy: the waiting request stops when its client leaves', async () => {
    let runs = 0;
    const handler = withIdempotency(
      async () => {
        runs++;
        await sleep(300);
        return new Response('ok', { status: 201 });
      },
      { store: createMemoryStore(), inFlight: { strategy: 'wait', maxWaitMs: 5_000 } },
    );
    const key = v7();
    const first = handler(post(key));
    await sleep(10);
    const controller = new AbortController();
    const started = performance.now();
    setTimeout(() => controller.abort(), 30);
    const left = await handler(post(key, '{"a":1}', { signal: controller.signal }));
    expect(performance.now() - started).toBeLessThan(250);
    expect(left.status).toBe(409);
    await (await first).text();
    expect(runs).toBe(1);
  });
});

describe('review: concurrency', () => {
  for (const [name, make] of Object.entries(stores).filter(([n]) => !n.startsWith('Redis'))) {
    test(`${name}: 20 concurrent requests with one key run the handler once`, async () => {
      const store = await make();
      try {
        let runs = 0;
        const handler = withIdempotency(
          async () => {
            runs++;
            await sleep(30);
            return Response.json({ run: runs }, { status: 201 });
          },
          { store },
        );
        const key = v7();
        const answers = await Promise.all(Array.from({ length: 20 }, () => handler(post(key))));
        await Promise.all(answers.map((a) => a.text()));
        expect(runs).toBe(1);
        expect(answers.filter((a) => a.status === 409)).toHaveLength(19);
        await sleep(20);
        expect((await handler(post(key))).headers.get('idempotent-replayed')).toBe('true');
      } finally {
        await store.close?.();
      }
    });
  }
});
