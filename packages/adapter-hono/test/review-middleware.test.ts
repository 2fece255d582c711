import { createHash } from 'node:crypto';
import { type IdempotencyEnv, idempotency } from '@idem/adapter-hono';
import { stores } from '@idem/adapter-suite';
import type { IdempotencyStore } from '@idem/core';
import { createMemoryStore } from '@idem/store-memory';
import { Hono } from 'hono';
import { v7 } from 'uuid';
import { describe, expect, test } from 'vitest';

/** What a `Response` takes as its body (not a global type without the DOM lib). */
type BodyInit = NonNullable<ConstructorParameters<typeof Response>[0]>;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const post = (
  app: Hono<IdempotencyEnv>,
  path: string,
  key: string | undefined,
  body: BodyInit | null = '{"a":1}',
  type: string | undefined = 'application/json',
  extra: Record<string, string> = {},
) =>
  app.request(path, {
    method: 'POST',
    headers: {
      ...(type === undefined ? {} : { 'content-type': type }),
      ...(key === undefined ? {} : { 'idempotency-key': key }),
      ...extra,
    },
    body,
  });

async function stateOf(store: IdempotencyStore, key: string, scope = ''): Promise<string | undefined> {
  const record = await store.load({ scope, key });
  if (record === undefined) return undefined;
  return record.response === null ? 'in-flight' : 'completed';
}

const hex = (bytes: ArrayBuffer | Uint8Array) =>
  createHash('sha256')
    .update(bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes))
    .digest('hex');

describe('review: errors around next()', () => {
  test('a handler that throws a non-Error value: the key is released, not left in flight', async () => {
    const store = createMemoryStore({ sweepIntervalMs: false });
    const app = new Hono<IdempotencyEnv>();
    app.use(idempotency({ store, leaseMs: 150, heartbeatIntervalMs: 50 }));
    let runs = 0;
    app.post('/boom', () => {
      runs++;
      throw 'boom'; // a string (or any non-Error): Hono's compose rethrows it past onError
    });
    const key = v7();
    await Promise.resolve(post(app, '/boom', key)).catch(() => undefined);
    await sleep(300); // two leases: without renewal the key would have lapsed
    const state = await stateOf(store, key);
    const retry = await Promise.resolve(post(app, '/boom', key)).catch((error: unknown) => error);
    expect({ state, retryStatus: (retry as Response).status, runs }).toEqual({
      state: undefined,
      retryStatus: undefined, // the retry runs the handler again (it throws again)
      runs: 2,
    });
  });

  test('an app.onError that rethrows: the key is released, not left in flight', async () => {
    const store = createMemoryStore({ sweepIntervalMs: false });
    const app = new Hono<IdempotencyEnv>();
    app.use(idempotency({ store, leaseMs: 150, heartbeatIntervalMs: 50 }));
    app.post('/boom', () => {
      throw new Error('boom');
    });
    app.onError((error) => {
      throw error; // e.g. to let the platform's own error handling answer
    });
    const key = v7();
    await Promise.resolve(post(app, '/boom', key)).catch(() => undefined);
    await sleep(300);
    expect(await stateOf(store, key)).toBeUndefined();
  });

  test('control: an Error thrown by the handler is answered by onError and releases the key', async () => {
    const store = createMemoryStore({ sweepIntervalMs: false });
    const app = new Hono<IdempotencyEnv>();
    app.use(idempotency({ store }));
    app.post('/boom', () => {
      throw new Error('boom');
    });
    const key = v7();
    expect((await post(app, '/boom', key)).status).toBe(500);
    await sleep(10);
    expect(await stateOf(store, key)).toBeUndefined();
  });

  test('a Response whose body the handler already read: the key is released, not left in flight', async () => {
    const store = createMemoryStore({ sweepIntervalMs: false });
    const app = new Hono<IdempotencyEnv>();
    app.use(idempotency({ store, leaseMs: 150, heartbeatIntervalMs: 50 }));
    app.post('/used', async () => {
      const upstream = new Response(
        new ReadableStream({
          start: (c) => {
            c.enqueue(new Uint8Array([1]));
            c.close();
          },
        }),
      );
      await upstream.arrayBuffer(); // a proxy that logged the body, then returned the response
      return upstream;
    });
    const key = v7();
    await Promise.resolve(post(app, '/used', key)).catch(() => undefined);
    await sleep(300);
    expect(await stateOf(store, key)).toBeUndefined();
  });
});

describe('review: what the handler reads of a keyed JSON body', () => {
  // A UTF-8 BOM, and a byte that is not UTF-8, inside a JSON body.
  const bodies = {
    bom: new Uint8Array([0xef, 0xbb, 0xbf, ...new TextEncoder().encode('{"a":1}')]),
    invalid: new Uint8Array([...new TextEncoder().encode('{"a":"'), 0xff, ...new TextEncoder().encode('"}')]),
  };

  for (const [name, bytes] of Object.entries(bodies)) {
    test(`${name}: c.req.arrayBuffer() in the handler is the bytes sent, with a key as without one`, async () => {
      const app = new Hono<IdempotencyEnv>();
      app.use(idempotency({ store: createMemoryStore() }));
      // A webhook-style handler that checks a signature over the raw body.
      app.post('/hook', async (c) => c.text(hex(await c.req.arrayBuffer())));
      const sent = hex(bytes);
      const withoutKey = await (await post(app, '/hook', undefined, bytes)).text();
      const withKey = await (await post(app, '/hook', v7(), bytes)).text();
      expect({ withoutKey, withKey }).toEqual({ withoutKey: sent, withKey: sent });
    });
  }

  test('two different non-UTF-8 JSON bodies under one key are two requests (422), not a replay', async () => {
    const app = new Hono<IdempotencyEnv>();
    app.use(idempotency({ store: createMemoryStore() }));
    let runs = 0;
    app.post('/hook', async (c) => {
      runs++;
      return c.text(hex(await c.req.arrayBuffer()), 201);
    });
    const one = new Uint8Array([
      ...new TextEncoder().encode('{"a":"'),
      0xff,
      ...new TextEncoder().encode('"}'),
    ]);
    const two = new Uint8Array([
      ...new TextEncoder().encode('{"a":"'),
      0xfe,
      ...new TextEncoder().encode('"}'),
    ]);
    const key = v7();
    expect((await post(app, '/hook', key, one)).status).toBe(201);
    const second = await post(app, '/hook', key, two);
    // The core hashes a JSON body that is not UTF-8 by its raw bytes exactly so that these never collide.
    expect({ status: second.status, replayed: second.headers.get('idempotent-replayed') }).toEqual({
      status: 422,
      replayed: null,
    });
    expect(runs).toBe(1);
  });

  test('control: the same two bodies as application/octet-stream are told apart', async () => {
    const app = new Hono<IdempotencyEnv>();
    app.use(idempotency({ store: createMemoryStore() }));
    app.post('/hook', async (c) => c.text(hex(await c.req.arrayBuffer()), 201));
    const key = v7();
    expect((await post(app, '/hook', key, new Uint8Array([0xff]), 'application/octet-stream')).status).toBe(
      201,
    );
    expect((await post(app, '/hook', key, new Uint8Array([0xfe]), 'application/octet-stream')).status).toBe(
      422,
    );
  });
});

describe('review: request body kinds and methods', () => {
  const kinds: [name: string, method: string, type: string | undefined, a: BodyInit, b: BodyInit][] = [
    ['merge-patch+json', 'PATCH', 'application/merge-patch+json', '{"a":1,"b":2}', '{"a":1,"b":3}'],
    ['text/plain', 'PUT', 'text/plain', 'hello', 'hellp'],
    ['no content type', 'POST', undefined, 'x', 'y'],
    ['vnd+json; charset', 'POST', 'application/vnd.api+json; charset=utf-8', '[1]', '[2]'],
  ];
  for (const [name, method, type, a, b] of kinds) {
    test(`${method} ${name}: replays the same body (JSON: key order aside), refuses another`, async () => {
      const app = new Hono<IdempotencyEnv>();
      app.use(idempotency({ store: createMemoryStore() }));
      let runs = 0;
      app.on(method, '/r', async (c) => c.json({ run: ++runs, got: await c.req.text() }, 201));
      const key = v7();
      const send = (body: BodyInit) =>
        app.request('/r', {
          method,
          headers: { 'idempotency-key': key, ...(type === undefined ? {} : { 'content-type': type }) },
          body,
        });
      const first = await send(a);
      expect(first.status).toBe(201);
      const again = await send(a);
      expect(again.headers.get('idempotent-replayed')).toBe('true');
      expect(await again.text()).toBe(await first.text());
      expect((await send(b)).status).toBe(422);
      expect(runs).toBe(1);
    });
  }

  test('multipart/form-data: parseBody still works after the middleware read the body', async () => {
    const app = new Hono<IdempotencyEnv>();
    app.use(idempotency({ store: createMemoryStore() }));
    app.post('/upload', async (c) => {
      const form = await c.req.parseBody();
      return c.json({ name: form.name, file: await (form.file as File).text() }, 201);
    });
    const form = new FormData();
    form.append('name', 'n');
    form.append('file', new Blob(['contents']), 'f.txt');
    const encoded = new Response(form);
    const type = encoded.headers.get('content-type') as string;
    const bytes = new Uint8Array(await encoded.arrayBuffer());
    const key = v7();
    const first = await post(app, '/upload', key, bytes, type);
    expect(await first.json()).toEqual({ name: 'n', file: 'contents' });
    const again = await post(app, '/upload', key, bytes, type);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
  });

  test('DELETE with a key and no body; content-length 0', async () => {
    const app = new Hono<IdempotencyEnv>();
    app.use(idempotency({ store: createMemoryStore() }));
    let runs = 0;
    app.delete('/d/:id', (c) => c.json({ run: ++runs }, 200));
    const key = v7();
    const send = () =>
      app.request('/d/1', { method: 'DELETE', headers: { 'idempotency-key': key, 'content-length': '0' } });
    const first = await send();
    expect([first.status, await first.text()]).toEqual([200, '{"run":1}']); // read, as a client does
    expect((await send()).headers.get('idempotent-replayed')).toBe('true');
    expect(runs).toBe(1);
  });

  test('a chunked empty body and a content-length 0 body under one key are the same request', async () => {
    const app = new Hono<IdempotencyEnv>();
    app.use(idempotency({ store: createMemoryStore() }));
    app.post('/e', (c) => c.json({ ok: true }, 201));
    const key = v7();
    const empty = new ReadableStream({ start: (c) => c.close() });
    const first = await app.request('/e', {
      method: 'POST',
      headers: { 'idempotency-key': key, 'transfer-encoding': 'chunked' },
      body: empty,
      duplex: 'half',
    } as RequestInit);
    expect(first.status).toBe(201);
    await first.text();
    const second = await app.request('/e', {
      method: 'POST',
      headers: { 'idempotency-key': key, 'content-length': '0' },
    });
    expect(second.headers.get('idempotent-replayed')).toBe('true');
  });
});

describe('review: mounting', () => {
  test('app-wide and per route on one request: processed once (one reservation, handler once)', async () => {
    const store = createMemoryStore({ sweepIntervalMs: false });
    let reserves = 0;
    const counted: IdempotencyStore = {
      ...store,
      reserve: (params) => {
        reserves++;
        return store.reserve(params);
      },
    };
    const app = new Hono<IdempotencyEnv>();
    const idem = idempotency({ store: counted });
    app.use(idem);
    app.post('/o', idem, idem.with({ lifetimeMs: 1000 }), (c) => c.json({ ok: 1 }, 201));
    const key = v7();
    expect((await post(app, '/o', key)).status).toBe(201);
    expect(reserves).toBe(1);
  });

  test('sub-app through app.route() and basePath: the route template, replay, and 422 for another path', async () => {
    const app = new Hono<IdempotencyEnv>().basePath('/v1');
    const api = new Hono<IdempotencyEnv>();
    const seen: string[] = [];
    api.use(
      idempotency({
        store: createMemoryStore(),
        onEvent: (event) => {
          if (event.type === 'reserved') seen.push(event.route);
        },
      }),
    );
    api.post('/items/:id', (c) => c.json({ id: c.req.param('id') }, 201));
    app.route('/api', api);
    const key = v7();
    expect((await post(app, '/v1/api/items/1', key)).status).toBe(201);
    expect((await post(app, '/v1/api/items/1', key)).headers.get('idempotent-replayed')).toBe('true');
    expect((await post(app, '/v1/api/items/2', key)).status).toBe(422);
    expect(seen).toEqual(['/v1/api/items/:id']);
  });

  test('a later catch-all route does not become the route template of the handler that answers', async () => {
    const app = new Hono<IdempotencyEnv>();
    const seen: string[] = [];
    app.use(
      idempotency({
        store: createMemoryStore(),
        onEvent: (event) => {
          if (event.type === 'reserved') seen.push(event.route);
        },
      }),
    );
    app.post('/orders/:id', (c) => c.json({ id: c.req.param('id') }, 201));
    app.post('*', (c) => c.json({ fallback: true }, 404));
    await post(app, '/orders/1', v7());
    expect(seen).toEqual(['/orders/:id']);
  });
});

describe('review: hooks and options', () => {
  test('scope throwing: onError answers, nothing reserved; the request is not left "taken"', async () => {
    const store = createMemoryStore({ sweepIntervalMs: false });
    const app = new Hono<IdempotencyEnv>();
    app.use(
      idempotency({
        store,
        scope: () => {
          throw new Error('no principal');
        },
      }),
    );
    let runs = 0;
    app.post('/o', (c) => c.json({ run: ++runs }, 201));
    const key = v7();
    expect((await post(app, '/o', key)).status).toBe(500);
    expect(runs).toBe(0);
    expect(await stateOf(store, key)).toBeUndefined();
  });

  test('formatError returning a BigInt / undefined / throwing: the default body, right status', async () => {
    for (const formatError of [
      () => 10n,
      () => undefined,
      () => {
        throw new Error('x');
      },
    ]) {
      const app = new Hono<IdempotencyEnv>();
      app.use(idempotency({ store: createMemoryStore(), required: true, formatError }));
      app.post('/o', (c) => c.json({}, 201));
      const res = await post(app, '/o', undefined);
      expect(res.status).toBe(400);
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe('IDEMPOTENCY_KEY_MISSING');
    }
  });

  test('onEvent and rebuildReplay throwing: the request and the replay are unaffected', async () => {
    const app = new Hono<IdempotencyEnv>();
    app.use(
      idempotency({
        store: createMemoryStore(),
        onEvent: () => {
          throw new Error('listener');
        },
        rebuildReplay: () => {
          throw new Error('rebuild');
        },
      }),
    );
    app.post('/o', (c) => c.json({ ok: 1 }, 201));
    const key = v7();
    expect((await post(app, '/o', key)).status).toBe(201);
    const again = await post(app, '/o', key);
    expect([again.status, await again.json()]).toEqual([201, { ok: 1 }]);
  });

  test('the wait strategy: a duplicate waits, then replays; a duplicate whose client leaves stops waiting', async () => {
    const app = new Hono<IdempotencyEnv>();
    app.use(idempotency({ store: createMemoryStore(), inFlight: { strategy: 'wait', maxWaitMs: 5_000 } }));
    let runs = 0;
    app.post('/slow', async (c) => {
      runs++;
      await sleep(300);
      return c.json({ run: runs }, 201);
    });
    const key = v7();
    const first = post(app, '/slow', key);
    await sleep(20);
    const waiting = post(app, '/slow', key);
    const controller = new AbortController();
    const started = performance.now();
    const leaving = app.request('/slow', {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': key },
      body: '{"a":1}',
      signal: controller.signal,
    });
    setTimeout(() => controller.abort(), 50);
    const left = await leaving;
    expect(performance.now() - started).toBeLessThan(250);
    expect(left.status).toBe(409);
    expect((await first).status).toBe(201);
    const waited = await waiting;
    expect(waited.headers.get('idempotent-replayed')).toBe('true');
    expect(runs).toBe(1);
  });

  test('failMode open with a store that throws: the handler runs, no record', async () => {
    const store = createMemoryStore();
    const broken: IdempotencyStore = { ...store, reserve: () => Promise.reject(new Error('down')) };
    const app = new Hono<IdempotencyEnv>();
    app.use(idempotency({ store: broken, failMode: 'open' }));
    let runs = 0;
    app.post('/o', (c) => c.json({ run: ++runs }, 201));
    const key = v7();
    expect((await post(app, '/o', key)).status).toBe(201);
    expect((await post(app, '/o', key)).status).toBe(201);
    expect(runs).toBe(2);
  });

  test('storeTimeoutMs with a hanging store: 503 with Retry-After in about that time', async () => {
    const store = createMemoryStore();
    const hanging: IdempotencyStore = { ...store, reserve: () => new Promise(() => {}) };
    const app = new Hono<IdempotencyEnv>();
    app.use(idempotency({ store: hanging, storeTimeoutMs: 100 }));
    app.post('/o', (c) => c.json({}, 201));
    const started = performance.now();
    const res = await post(app, '/o', v7());
    expect(res.status).toBe(503);
    expect(res.headers.get('retry-after')).toBe('1');
    expect(performance.now() - started).toBeLessThan(1000);
  });

  test('.with({ enabled: false }) per route: the header changes nothing there', async () => {
    const app = new Hono<IdempotencyEnv>();
    const idem = idempotency({ store: createMemoryStore() });
    let runs = 0;
    app.post('/hooks', idem.with({ enabled: false }), (c) => c.json({ run: ++runs }, 201));
    const key = v7();
    await post(app, '/hooks', key);
    await post(app, '/hooks', key, '{"b":2}');
    expect(runs).toBe(2);
  });
});

describe('review: concurrency', () => {
  for (const [name, make] of Object.entries(stores).filter(([n]) => !n.startsWith('Redis'))) {
    test(`${name}: 20 concurrent requests with one key run the handler once`, async () => {
      const store = await make();
      try {
        const app = new Hono<IdempotencyEnv>();
        app.use(idempotency({ store }));
        let runs = 0;
        app.post('/o', async (c) => {
          runs++;
          await sleep(30);
          return c.json({ run: runs }, 201);
        });
        const key = v7();
        const answers = await Promise.all(Array.from({ length: 20 }, () => post(app, '/o', key)));
        const statuses = answers.map((a) => a.status).sort();
        expect(runs).toBe(1);
        expect(statuses.filter((s) => s === 201)).toHaveLength(1);
        expect(statuses.filter((s) => s === 409)).toHaveLength(19);
        await sleep(20);
        const again = await post(app, '/o', key);
        expect(again.headers.get('idempotent-replayed')).toBe('true');
        expect(runs).toBe(1);
      } finally {
        await store.close?.();
      }
    });
  }
});
