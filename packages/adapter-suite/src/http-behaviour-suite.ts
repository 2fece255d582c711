import assert from 'node:assert/strict';
import { identitySuite } from './identity-suite.js';
import { type AdapterKind, lifecycleMatrix } from './lifecycle-matrix.js';
import { instrument, stores } from './stores.js';
import {
  call,
  leave,
  type MakeServer,
  newKey,
  type SuiteHarness,
  serverRunner,
  settled,
  sleep,
} from './support.js';

/**
 * The HTTP behaviour every adapter must show, over a real listening server, for each store: every row of
 * design.md's The coordinator and Finalization rules. The suite also fails on any unhandled rejection or uncaught exception while it runs.
 */
export function httpBehaviourSuite(
  harness: SuiteHarness,
  makeServer: MakeServer,
  /**
   * `'web'` for an adapter on Web-standard `Request`/`Response`: it reads every keyed body's bytes itself, so
   * no body goes unseen, and its lifecycle cells read as `lifecycleMatrix` says.
   */
  kind: AdapterKind = 'node',
): void {
  const { describe, test } = harness;
  for (const [storeName, makeStore] of Object.entries(stores)) {
    describe(`with the ${storeName} store`, () => {
      const withServer = serverRunner(makeServer, makeStore);
      lifecycleMatrix(harness, withServer, kind);
      identitySuite(harness, withServer);

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

      test('a streamed response is stored and replayed whole', () =>
        withServer({}, async ({ url, business }) => {
          const key = newKey();
          const first = await call(url, '/plan/ok', { key });
          const retry = await call(url, '/plan/ok', { key });
          assert.equal(first.bytes.toString(), 'alpha,beta,gamma');
          assert.equal(retry.bytes.toString(), 'alpha,beta,gamma');
          assert.equal(retry.headers.get('idempotent-replayed'), 'true');
          assert.equal(business.calls('plan-ok'), 1);
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

      test('a formatError that throws: the answer keeps its status with the default body, nothing crashes', () =>
        withServer(
          {
            required: true,
            formatError: () => {
              throw new Error('formatter failure');
            },
          },
          async ({ url, business }) => {
            const answer = await call(url, '/orders');
            assert.equal(answer.status, 400);
            assert.equal(
              (answer.json() as { error: { code: string } }).error.code,
              'IDEMPOTENCY_KEY_MISSING',
            );
            assert.equal(business.calls('orders'), 0);
          },
        ));

      test('a rebuildReplay that throws: the stored answer is replayed', () =>
        withServer(
          { rebuildReplay: () => Promise.reject(new Error('no view')) },
          async ({ url, business }) => {
            const key = newKey();
            const first = await call(url, '/orders', { key });
            const retry = await call(url, '/orders', { key });
            assert.equal(retry.status, 201);
            assert.ok(retry.bytes.equals(first.bytes));
            assert.equal(business.calls('orders'), 1);
          },
        ));

      test('a client that leaves during a long handler: the lease is still renewed, its retry never runs it again', () =>
        withServer({ leaseMs: 300, heartbeatIntervalMs: 50 }, async ({ url, business, store }) => {
          const key = newKey();
          await leave(url, '/slow/800', { key, at: business.entered('slow') });
          await sleep(500); // well past the lease: only the heartbeat holds the key now
          const early = await call(url, '/slow/800', { key });
          assert.equal(early.status, 409, 'the first request still runs');
          await settled(store, key);
          const retry = await call(url, '/slow/800', { key });
          assert.equal(retry.status, 201);
          assert.equal(retry.headers.get('idempotent-replayed'), 'true');
          assert.equal(business.calls('slow'), 1);
        }));

      test('a handler that destroys its response before any status: the key is released at once', () =>
        withServer({ leaseMs: 30_000 }, async ({ url, business, store }) => {
          const key = newKey();
          await call(url, '/destroy', { key }).catch(() => undefined);
          await sleep(50);
          assert.equal(await store.load({ scope: '', key }), undefined, 'released, not held for the lease');
          await call(url, '/destroy', { key }).catch(() => undefined);
          assert.equal(business.calls('destroy'), 2);
        }));

      if (kind === 'web')
        test('an upload the handler reads itself: the adapter read its bytes too, so it runs once and replays', () =>
          withServer({}, async ({ url, business }) => {
            const key = newKey();
            const upload = { method: 'PUT', contentType: 'application/octet-stream' };
            const first = await call(url, '/files/1', { ...upload, key, rawBody: 'version one' });
            assert.equal(first.status, 201, first.bytes.toString());
            assert.deepEqual(first.json(), { id: '1', stored: 'version one' });
            const retry = await call(url, '/files/1', { ...upload, key, rawBody: 'version one' });
            assert.equal(retry.headers.get('idempotent-replayed'), 'true');
            const other = await call(url, '/files/1', { ...upload, key, rawBody: 'version two' });
            assert.equal(other.status, 422);
            assert.equal(business.calls('upload'), 1);
          }));
      else
        test('an upload the handler reads itself: refused before anything is reserved, unless it has no key', () =>
          withServer({}, async ({ url, business, store }) => {
            const key = newKey();
            const upload = { method: 'PUT', contentType: 'application/octet-stream' };
            const keyed = await call(url, '/files/1', { ...upload, key, rawBody: 'version one' });
            assert.equal(keyed.status, 415, 'no fingerprint can be taken of a body nobody read');
            assert.equal((keyed.json() as { error: { code: string } }).error.code, 'IDEMPOTENCY_BODY_UNSEEN');
            assert.equal(keyed.headers.get('retry-after'), null);
            assert.equal(await store.load({ scope: '', key }), undefined);
            assert.equal(business.calls('upload'), 0);
            const plain = await call(url, '/files/1', { ...upload, rawBody: 'version one' });
            assert.equal(plain.status, 201);
            assert.deepEqual(plain.json(), { id: '1', stored: 'version one' });
          }));

      for (const [name, contentType] of [
        ['a content type no parser reads', 'application/x-unknown'],
        ['no content type', undefined],
      ] as const) {
        if (kind === 'web') {
          test(`a keyed JSON body with ${name}: its bytes are the identity, it runs once and replays`, () =>
            withServer({}, async ({ url, business }) => {
              const key = newKey();
              const send = (text: string) =>
                call(url, '/orders', {
                  key,
                  rawBytes: new TextEncoder().encode(text),
                  ...(contentType === undefined ? { contentType: '' } : { contentType }),
                });
              assert.equal((await send('{"item":"book"}')).status, 201);
              assert.equal((await send('{"item":"book"}')).headers.get('idempotent-replayed'), 'true');
              // Not read as JSON: the same value written otherwise is another request.
              assert.equal((await send('{ "item": "book" }')).status, 422);
              assert.equal(business.calls('orders'), 1);
            }));
          continue;
        }
        test(`a keyed JSON body with ${name}: a 415, nothing reserved, the handler does not run`, () =>
          withServer({}, async ({ url, business, store }) => {
            const key = newKey();
            const answer = await call(url, '/orders', {
              key,
              rawBytes: new TextEncoder().encode('{"item":"book"}'),
              ...(contentType === undefined ? { contentType: '' } : { contentType }),
            });
            assert.equal(answer.status, 415, answer.bytes.toString());
            assert.equal(await store.load({ scope: '', key }), undefined);
            assert.equal(business.calls('orders'), 0);
          }));
      }

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
