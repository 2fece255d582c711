import assert from 'node:assert/strict';
import {
  type CapturedResponse,
  createIdempotency,
  ErrorCode,
  type IdempotencyStore,
  isStoreLimitError,
  type StoredResponse,
} from '@idem/core';
import { BASE_MS, type ConformanceGroup, freshRef, reserveAt, withStore } from '../harness.js';

/** Values a host may hand the store as a scope or key: each is held exactly or refused as a limit. */
const IDENTIFIERS: readonly (readonly [name: string, value: string])[] = [
  ['of 256 characters', 's'.repeat(256)],
  ['of 1,025 characters', 's'.repeat(1_025)],
  ['of 70,000 characters', 's'.repeat(70_000)],
  ['with NUL', 'tenant\u0000a'],
  ['with a lone surrogate', 'tenant\ud800'],
  ['with astral characters and a newline', 'tenant-😀\nb'],
];

const LONG_LINK = `<https://example.com/${'x'.repeat(70_000)}>; rel="next"`;

/** Responses a handler may answer with that a store may not hold whole. */
function responses(maxBodyBytes: number | undefined): (readonly [name: string, response: StoredResponse])[] {
  const cases: (readonly [string, StoredResponse])[] = [
    ['a 70,000-byte header', { status: 201, headers: { link: LONG_LINK }, body: bytes('made') }],
    [
      '2,000 headers of 100 bytes',
      {
        status: 201,
        headers: Object.fromEntries(
          Array.from({ length: 2_000 }, (_, i) => [`x-h-${i}`, 'v'.repeat(100)] as const),
        ),
        body: bytes('made'),
      },
    ],
    [
      'header values with NUL, a lone surrogate and astral characters',
      { status: 201, headers: { 'x-a': 'a\u0000b', 'x-b': 'c\udc00', 'x-c': '😀' }, body: bytes('made') },
    ],
  ];
  if (maxBodyBytes !== undefined) {
    cases.push([
      `a body one byte over the declared limit (${maxBodyBytes} bytes)`,
      { status: 201, headers: {}, body: new Uint8Array(maxBodyBytes + 1).fill(0x61) },
    ]);
  }
  return cases;
}

const bytes = (text: string): Uint8Array => new TextEncoder().encode(text);

const sameBytes = (a: Uint8Array | null, b: Uint8Array | null): boolean =>
  a === null || b === null
    ? a === b
    : Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(
        Buffer.from(b.buffer, b.byteOffset, b.byteLength),
      );

/**
 * What a store cannot hold, it refuses with an `IdemStoreLimitError` before the value reaches the backend, and
 * changes nothing; what it takes, it gives back exactly. Through the coordinator, a refusal at reserve is a 400
 * that runs nothing, and one at finalize keeps what fits (the status always): the handler runs once, and every
 * retry is answered with that status.
 */
export const limitsGroup: ConformanceGroup = (harness, makeStore) => {
  const { describe, test } = harness;
  describe('limits', () => {
    for (const field of ['scope', 'key'] as const) {
      for (const [name, value] of IDENTIFIERS) {
        test(`a ${field} ${name} MUST be held exactly or refused as a limit, never mangled`, () =>
          withStore(makeStore, async ({ store }) => {
            const ref = { ...freshRef(), [field]: value };
            const params = reserveAt(ref, BASE_MS);
            let reserved: boolean;
            try {
              reserved = (await store.reserve(params)).outcome === 'reserved';
            } catch (error) {
              assert.ok(isStoreLimitError(error), `a refusal MUST be an IdemStoreLimitError, got ${error}`);
              return;
            }
            assert.equal(reserved, true);
            const record = await store.load(ref);
            assert.equal(record?.[field], value, `the ${field} MUST come back exactly`);
            // Another value that a lossy encoding would make equal (U+FFFD for the surrogate, a cut for length)
            // MUST be another record.
            const near = { ...ref, [field]: value.replace('\ud800', '\ufffd').slice(0, 255) };
            if (near[field] !== value) assert.equal(await loadOrRefused(store, near), undefined);
          }));
      }
    }

    test('a finalize refused as a limit MUST change nothing: the same owner’s smaller finalize then succeeds', () =>
      withStore(makeStore, async ({ store }) => {
        for (const [name, response] of responses(store.limits?.maxBodyBytes)) {
          const ref = freshRef();
          const params = reserveAt(ref, BASE_MS);
          await store.reserve(params);
          const finalize = (r: StoredResponse) =>
            store.finalize({ ...ref, owner: params.owner, response: r, nowMs: BASE_MS + 1 });
          let stored: boolean;
          try {
            stored = await finalize(response);
          } catch (error) {
            assert.ok(
              isStoreLimitError(error),
              `${name}: a refusal MUST be an IdemStoreLimitError, got ${error}`,
            );
            const after = await store.load(ref);
            assert.equal(
              after?.response,
              null,
              `${name}: a refused finalize MUST leave the record in flight`,
            );
            assert.equal(after?.owner, params.owner, `${name}: … and owned by the same owner`);
            assert.equal(await finalize({ status: 201, headers: {}, body: null }), true, name);
            continue;
          }
          assert.equal(stored, true, name);
          const back = (await store.load(ref))?.response;
          assert.deepEqual(back?.headers, response.headers, `${name}: headers MUST come back exactly`);
          assert.ok(sameBytes(back?.body ?? null, response.body), `${name}: the body MUST come back exactly`);
        }
      }));

    describe('through the coordinator', () => {
      for (const field of ['scope', 'key'] as const) {
        test(`a ${field} the store refuses is a 400 IDEMPOTENCY_STORE_LIMIT that runs nothing, on every retry; one it holds runs once`, () =>
          withStore(makeStore, async ({ store }) => {
            for (const [name, value] of IDENTIFIERS) {
              const idem = createIdempotency({
                store,
                heartbeatIntervalMs: false,
                // Any key at all, so that the store's limits are what is tested, not the key format.
                keyFormat: (key) => ({ ok: true, key }),
              });
              const request = {
                method: 'POST',
                route: '/r',
                key: field === 'key' ? value : freshRef().key,
                scope: field === 'scope' ? value : freshRef().scope,
              };
              let executions = 0;
              const answers: string[] = [];
              for (let attempt = 0; attempt < 3; attempt++) {
                const result = await idem.begin(request);
                if (result.action === 'execute') {
                  executions++;
                  assert.equal(await result.execution.finish(answer), 'finalized', name);
                  answers.push('executed');
                } else if (result.action === 'reject') {
                  assert.equal(result.error.code, ErrorCode.StoreLimit, `${name}: ${result.error.message}`);
                  assert.equal(result.error.status, 400, name);
                  answers.push('refused');
                } else {
                  assert.equal(result.action, 'replay', name);
                  answers.push('replayed');
                }
              }
              assert.ok(
                answers.join() === 'refused,refused,refused' ||
                  answers.join() === 'executed,replayed,replayed',
                `${field} ${name}: ${answers.join()}`,
              );
              assert.ok(executions <= 1, `${field} ${name}: the handler ran ${executions} times`);
            }
          }));
      }

      test('a response the store cannot hold whole runs once: every retry replays its status, the rest exact or marked omitted', () =>
        withStore(makeStore, async ({ store }) => {
          for (const [name, response] of responses(store.limits?.maxBodyBytes)) {
            const idem = createIdempotency({
              store,
              heartbeatIntervalMs: false,
              replayHeaders: Object.keys(response.headers),
              maxBodyBytes: 16 * 1024 * 1024,
              keyFormat: 'token',
            });
            const request = { method: 'POST', route: '/r', key: freshRef().key, scope: freshRef().scope };
            let executions = 0;
            for (let attempt = 0; attempt < 4; attempt++) {
              const result = await idem.begin(request);
              if (result.action === 'execute') {
                executions++;
                const captured: CapturedResponse = { ...response };
                assert.equal(await result.execution.finish(captured), 'finalized', name);
                continue;
              }
              assert.equal(result.action, 'replay', `${name}: attempt ${attempt} was ${result.action}`);
              if (result.action !== 'replay') return;
              const replay = result.response;
              assert.equal(replay.status, response.status, name);
              const {
                'idempotent-replayed': _,
                'idempotent-replay-body-omitted': bodyMarker,
                ...headers
              } = replay.headers;
              const headersOmitted = headers['idempotent-replay-headers-omitted'] === 'true';
              const bodyOmitted = bodyMarker === 'true';
              if (!headersOmitted) assert.deepEqual(headers, response.headers, `${name}: headers exact`);
              if (bodyOmitted) assert.equal(replay.body, null, name);
              else assert.ok(sameBytes(replay.body, response.body), `${name}: body exact or marked omitted`);
            }
            assert.equal(executions, 1, `${name}: the handler ran ${executions} times`);
          }
        }));
    });
  });
};

const answer: CapturedResponse = { status: 201, headers: {}, body: '{"ok":true}' };

/** A load of a ref the store may refuse outright (then nothing can be stored under it either). */
async function loadOrRefused(store: IdempotencyStore, ref: { scope: string; key: string }) {
  try {
    return await store.load(ref);
  } catch (error) {
    assert.ok(isStoreLimitError(error), `a refusal MUST be an IdemStoreLimitError, got ${error}`);
    return undefined;
  }
}
