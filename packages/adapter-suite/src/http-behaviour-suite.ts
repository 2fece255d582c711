import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { IdempotencyOptions, IdempotencyStore } from '@idem/core';
import { type Business, createBusiness } from './business.js';
import { instrument, stores } from './stores.js';

/** What a test app gets: the options to hand to its adapter, and the handlers to mount (see Business). */
export interface ServerConfig {
  /** Pass these to the adapter, plus `scope` read from the `x-principal` request header. */
  readonly options: IdempotencyOptions;
  readonly business: Business;
}

/** Start a listening HTTP server for one test; `close` stops it. */
export type MakeServer = (config: ServerConfig) => Promise<{ url: string; close(): Promise<void> }>;

export interface SuiteHarness {
  describe(name: string, body: () => void): unknown;
  test(name: string, body: () => Promise<void>): unknown;
}

interface Answer {
  status: number;
  headers: Headers;
  bytes: Buffer;
  json(): unknown;
}

/** A random UUIDv7-shaped key. */
export const newKey = (): string => {
  const uuid = randomUUID();
  return `${uuid.slice(0, 14)}7${uuid.slice(15)}`;
};

async function call(
  url: string,
  path: string,
  init: {
    method?: string;
    key?: string | string[];
    body?: unknown;
    principal?: string;
    signal?: AbortSignal;
  } = {},
): Promise<Answer> {
  const headers = new Headers({ 'content-type': 'application/json' });
  for (const key of typeof init.key === 'string' ? [init.key] : (init.key ?? []))
    headers.append('idempotency-key', key);
  if (init.principal !== undefined) headers.set('x-principal', init.principal);
  const response = await fetch(url + path, {
    method: init.method ?? 'POST',
    headers,
    ...(init.method === 'GET' ? {} : { body: JSON.stringify(init.body ?? { item: 'book' }) }),
    ...(init.signal ? { signal: init.signal } : {}),
  });
  const bytes = Buffer.from(await response.arrayBuffer());
  return {
    status: response.status,
    headers: response.headers,
    bytes,
    json: () => JSON.parse(bytes.toString()),
  };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * The HTTP behaviour every adapter must show, over a real listening server, for each store: every row of
 * design §4 and §5. The suite also fails on any unhandled rejection or uncaught exception while it runs.
 */
export function httpBehaviourSuite(harness: SuiteHarness, makeServer: MakeServer): void {
  const { describe, test } = harness;
  const crashes: unknown[] = [];
  const onCrash = (error: unknown) => crashes.push(error);

  for (const [storeName, makeStore] of Object.entries(stores)) {
    describe(`with the ${storeName} store`, () => {
      async function withServer(
        options: Partial<IdempotencyOptions> & { wrapStore?: (store: IdempotencyStore) => IdempotencyStore },
        body: (context: { url: string; business: Business }) => Promise<void>,
      ): Promise<void> {
        process.on('unhandledRejection', onCrash);
        process.on('uncaughtException', onCrash);
        const base = await makeStore();
        const { wrapStore, ...rest } = options;
        const business = createBusiness();
        const server = await makeServer({
          options: { store: wrapStore ? wrapStore(base) : base, heartbeatIntervalMs: false, ...rest },
          business,
        });
        try {
          await body({ url: server.url, business });
          await sleep(20); // let finish/release land before the next assertions and the crash check
          assert.deepEqual(crashes, [], 'no unhandled rejection or uncaught exception');
        } finally {
          await server.close();
          await base.close?.();
          process.off('unhandledRejection', onCrash);
          process.off('uncaughtException', onCrash);
        }
      }

      test('no key: the handler runs every time and nothing is replayed', () =>
        withServer({}, async ({ url, business }) => {
          const first = await call(url, '/orders');
          const second = await call(url, '/orders');
          assert.equal(first.status, 201);
          assert.equal(second.status, 201);
          assert.equal(second.headers.get('idempotent-replayed'), null);
          assert.equal(business.calls('orders'), 2);
        }));

      test('required and no key: 400 IDEMPOTENCY_KEY_MISSING, the handler does not run', () =>
        withServer({ required: true }, async ({ url, business }) => {
          const answer = await call(url, '/orders');
          assert.equal(answer.status, 400);
          assert.equal((answer.json() as { error: { code: string } }).error.code, 'IDEMPOTENCY_KEY_MISSING');
          assert.equal(business.calls('orders'), 0);
        }));

      test('every invalid key class: 400 IDEMPOTENCY_KEY_INVALID, store untouched, handler not run', async () => {
        const spy = { calls: () => 0 };
        await withServer(
          {
            wrapStore: (store) => {
              const instrumented = instrument(store);
              spy.calls = instrumented.calls;
              return instrumented.store;
            },
          },
          async ({ url, business }) => {
            const v7 = newKey();
            for (const key of [
              '9b2f1c1e-3f4a-4b5c-8d6e-7f8091a2b3c4', // v4
              '00000000-0000-0000-0000-000000000000', // nil
              v7.replace(/-/g, ''), // 32 hex
              `{${v7}}`,
              `urn:uuid:${v7}`,
              `${v7.slice(0, 19)}c${v7.slice(20)}`, // wrong variant
              v7.slice(0, 35),
              'not-a-key',
              [v7, v7], // the header twice
            ]) {
              const answer = await call(url, '/orders', { key });
              assert.equal(answer.status, 400, `key ${JSON.stringify(key)}`);
              assert.equal(
                (answer.json() as { error: { code: string } }).error.code,
                'IDEMPOTENCY_KEY_INVALID',
              );
            }
            assert.equal(spy.calls(), 0);
            assert.equal(business.calls('orders'), 0);
          },
        );
      });

      test('a retry replays byte for byte: 201 with Location, allow-listed headers, Idempotent-Replayed', () =>
        withServer({}, async ({ url, business }) => {
          const key = newKey();
          const first = await call(url, '/orders', { key, body: { item: 'book', qty: 2 } });
          const retry = await call(url, '/orders', { key, body: { qty: 2, item: 'book' } });
          assert.equal(first.status, 201);
          assert.equal(retry.status, 201);
          assert.equal(retry.headers.get('location'), first.headers.get('location'));
          assert.equal(retry.headers.get('content-type'), first.headers.get('content-type'));
          assert.ok(retry.bytes.equals(first.bytes), 'the replayed body is byte-identical');
          assert.equal(retry.headers.get('idempotent-replayed'), 'true');
          assert.equal(first.headers.get('idempotent-replayed'), null);
          assert.equal(retry.headers.get('set-cookie'), null, 'Set-Cookie is never replayed');
          assert.equal(business.calls('orders'), 1);
        }));

      test('same key, another body: 422 IDEMPOTENCY_KEY_REUSED, the handler does not run again', () =>
        withServer({}, async ({ url, business }) => {
          const key = newKey();
          await call(url, '/orders', { key, body: { item: 'book' } });
          const answer = await call(url, '/orders', { key, body: { item: 'pen' } });
          assert.equal(answer.status, 422);
          assert.equal((answer.json() as { error: { code: string } }).error.code, 'IDEMPOTENCY_KEY_REUSED');
          assert.equal(business.calls('orders'), 1);
        }));

      test('the same key from two principals is two independent requests', () =>
        withServer({}, async ({ url, business }) => {
          const key = newKey();
          const alice = await call(url, '/orders', { key, principal: 'alice' });
          const bob = await call(url, '/orders', { key, principal: 'bob', body: { other: true } });
          assert.equal(bob.status, 201);
          assert.notEqual(bob.headers.get('location'), alice.headers.get('location'));
          assert.equal(business.calls('orders'), 2);
        }));

      test('GET is not covered: a key on it changes nothing', () =>
        withServer({}, async ({ url, business }) => {
          const key = newKey();
          await call(url, '/orders', { method: 'GET', key });
          const again = await call(url, '/orders', { method: 'GET', key });
          assert.equal(again.headers.get('idempotent-replayed'), null);
          assert.equal(business.calls('list'), 2);
        }));

      test('20 concurrent requests with one key: the handler runs once, every other answer is a replay or a 409', () =>
        withServer({}, async ({ url, business }) => {
          const key = newKey();
          const answers = await Promise.all(Array.from({ length: 20 }, () => call(url, '/slow/50', { key })));
          assert.equal(business.calls('slow'), 1);
          for (const answer of answers) {
            const replay = answer.status === 201;
            assert.ok(replay || answer.status === 409, `status ${answer.status}`);
            if (answer.status === 409) assert.ok(answer.headers.get('retry-after'));
          }
        }));

      test('20 concurrent requests with one key and the wait strategy: one runs, all others replay it', () =>
        withServer(
          { inFlight: { strategy: 'wait', maxWaitMs: 5_000, initialPollMs: 10, maxPollMs: 50 } },
          async ({ url, business }) => {
            const key = newKey();
            const answers = await Promise.all(
              Array.from({ length: 20 }, () => call(url, '/slow/80', { key })),
            );
            assert.equal(business.calls('slow'), 1);
            const bodies = new Set(answers.map((a) => a.bytes.toString()));
            assert.deepEqual([...new Set(answers.map((a) => a.status))], [201]);
            assert.equal(bodies.size, 1, 'every client got the same answer');
            assert.equal(answers.filter((a) => a.headers.get('idempotent-replayed') === 'true').length, 19);
          },
        ));

      test('the handler throws: 500, the key is released and the retry executes', () =>
        withServer({}, async ({ url, business }) => {
          const key = newKey();
          assert.equal((await call(url, '/throw', { key })).status, 500);
          assert.equal((await call(url, '/throw', { key })).status, 500);
          assert.equal(business.calls('throw'), 2);
        }));

      for (const [code, replayed] of [
        [503, false],
        [500, false],
        [429, false],
        [401, false],
        [404, true],
        [409, true],
        [400, true],
        [204, true],
      ] as const) {
        test(`a ${code} from the handler is ${replayed ? 'stored and replayed' : 'released, never stored'}`, () =>
          withServer({}, async ({ url, business }) => {
            const key = newKey();
            const first = await call(url, `/status/${code}`, { key });
            const retry = await call(url, `/status/${code}`, { key });
            assert.equal(first.status, code);
            assert.equal(retry.status, code);
            assert.equal(business.calls(`status-${code}`), replayed ? 1 : 2);
            assert.equal(retry.headers.get('idempotent-replayed'), replayed ? 'true' : null);
            if (replayed) assert.ok(retry.bytes.equals(first.bytes));
          }));
      }

      test('the client aborts mid-handler: the key is released and the retry executes', () =>
        withServer({}, async ({ url, business }) => {
          const key = newKey();
          const controller = new AbortController();
          const aborted = call(url, '/slow/200', { key, signal: controller.signal }).catch(
            (error: Error) => error,
          );
          await sleep(50);
          controller.abort();
          assert.ok((await aborted) instanceof Error);
          await sleep(300); // the handler finishes into a closed connection
          const retry = await call(url, '/slow/10', { key });
          assert.equal(retry.status, 201);
          assert.equal(retry.headers.get('idempotent-replayed'), null);
          assert.equal(business.calls('slow'), 2);
        }));

      test('a streamed response is stored and replayed whole', () =>
        withServer({}, async ({ url, business }) => {
          const key = newKey();
          const first = await call(url, '/stream', { key });
          const retry = await call(url, '/stream', { key });
          assert.equal(first.bytes.toString(), 'alpha,beta,gamma');
          assert.equal(retry.bytes.toString(), 'alpha,beta,gamma');
          assert.equal(retry.headers.get('idempotent-replayed'), 'true');
          assert.equal(business.calls('stream'), 1);
        }));

      test('binary bodies replay byte for byte', () =>
        withServer({}, async ({ url }) => {
          const key = newKey();
          const first = await call(url, '/binary', { key });
          const retry = await call(url, '/binary', { key });
          assert.equal(first.bytes.length, 256);
          assert.ok(retry.bytes.equals(first.bytes));
        }));

      test('a body over the cap: the replay has status and headers, no body, and says it was omitted', () =>
        withServer({ maxBodyBytes: 1_000 }, async ({ url, business }) => {
          const key = newKey();
          const first = await call(url, '/big/5000', { key });
          const retry = await call(url, '/big/5000', { key });
          assert.equal(first.bytes.length, 5_000);
          assert.equal(retry.status, 200);
          assert.equal(retry.headers.get('content-type'), 'application/octet-stream');
          assert.equal(retry.headers.get('idempotent-replay-body-omitted'), 'true');
          assert.equal(retry.bytes.length, 0);
          assert.equal(business.calls('big'), 1);
        }));

      test('a store that throws: 503 with Retry-After, the handler does not run', () =>
        withServer({ wrapStore: (store) => instrument(store, 'throw').store }, async ({ url, business }) => {
          const answer = await call(url, '/orders', { key: newKey() });
          assert.equal(answer.status, 503);
          assert.equal(answer.headers.get('retry-after'), '1');
          assert.equal(
            (answer.json() as { error: { code: string } }).error.code,
            'IDEMPOTENCY_STORE_UNAVAILABLE',
          );
          assert.equal(business.calls('orders'), 0);
        }));

      test('a store that hangs: 503 with Retry-After within the store timeout', () =>
        withServer(
          { storeTimeoutMs: 200, wrapStore: (store) => instrument(store, 'hang').store },
          async ({ url, business }) => {
            const started = performance.now();
            const answer = await call(url, '/orders', { key: newKey() });
            assert.equal(answer.status, 503);
            assert.ok(answer.headers.get('retry-after'));
            assert.ok(performance.now() - started < 2_000, 'answered within the timeout, not hung');
            assert.equal(business.calls('orders'), 0);
          },
        ));

      test('fail open (opt-in): a store that throws lets the request through without a record', () =>
        withServer(
          { failMode: 'open', wrapStore: (store) => instrument(store, 'throw').store },
          async ({ url, business }) => {
            const answer = await call(url, '/orders', { key: newKey() });
            assert.equal(answer.status, 201);
            assert.equal(business.calls('orders'), 1);
          },
        ));
    });
  }
}
