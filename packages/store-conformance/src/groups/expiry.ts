import assert from 'node:assert/strict';
import type { IdempotencyStore } from '@idem/core';
import {
  BASE_MS,
  type ConformanceGroup,
  fingerprintOf,
  freshRef,
  jsonResponse,
  type MakeStore,
  PURGE_BASE_MS,
  reserveAt,
  resolveOptions,
  type TestHarness,
  withStore,
} from '../harness.js';

/** Write `count` records expiring at PURGE_BASE_MS + offset for each offset; half of them completed. */
async function seed(store: IdempotencyStore, expiryOffsetsMs: readonly number[]) {
  const refs = [];
  for (const [i, offsetMs] of expiryOffsetsMs.entries()) {
    const ref = freshRef();
    const params = reserveAt(ref, 0, { expiresAtMs: PURGE_BASE_MS + offsetMs, leaseUntilMs: 100 });
    await store.reserve(params);
    if (i % 2 === 0) {
      await store.finalize({ ...ref, owner: params.owner, response: jsonResponse(200, { i }), nowMs: 1 });
    }
    refs.push({ ref, expiresAtMs: PURGE_BASE_MS + offsetMs });
  }
  return refs;
}

/** The purge-count tests that a store with native expiry replaces, by name. */
const PURGE_COUNT_TESTS = [
  'purgeExpired MUST delete only records with expiresAtMs < beforeMs and return the exact count',
  'purgeExpired MUST honour limit',
  'two purgers at once MUST together delete each expired record exactly once',
];

/**
 * purgeExpired removes exactly the expired records, in bounded batches, safely from several callers; or, for a
 * store whose backend expires records itself (`nativeExpiry`), expired records are replaced and never replayed
 * and a purge never deletes a live one.
 */
export const expiryGroup: ConformanceGroup = (harness, makeStore, options) => {
  const { nativeExpiry } = resolveOptions(options);
  if (nativeExpiry !== undefined) {
    nativeExpiryTests(harness, makeStore, nativeExpiry.reason);
    return;
  }
  const { describe, test } = harness;
  describe('expiry and purge', () => {
    test('purgeExpired MUST delete only records with expiresAtMs < beforeMs and return the exact count', () =>
      withStore(makeStore, async ({ store }) => {
        const records = await seed(store, [1, 2, 3, 4, 5, 6]);
        const beforeMs = PURGE_BASE_MS + 4; // 1, 2, 3 go; 4 (equal) stays.
        assert.equal(await store.purgeExpired({ beforeMs, limit: 100 }), 3);
        for (const { ref, expiresAtMs } of records) {
          const record = await store.load(ref);
          assert.equal(record === undefined, expiresAtMs < beforeMs, `record expiring at ${expiresAtMs}`);
        }
        assert.equal(await store.purgeExpired({ beforeMs, limit: 100 }), 0, 'nothing is left to purge');
      }));

    test('purgeExpired MUST honour limit', () =>
      withStore(makeStore, async ({ store }) => {
        await seed(store, [1, 1, 2, 2, 3, 3, 4]);
        const beforeMs = PURGE_BASE_MS + 10;
        assert.equal(await store.purgeExpired({ beforeMs, limit: 3 }), 3);
        assert.equal(await store.purgeExpired({ beforeMs, limit: 3 }), 3);
        assert.equal(await store.purgeExpired({ beforeMs, limit: 3 }), 1);
        assert.equal(await store.purgeExpired({ beforeMs, limit: 3 }), 0);
      }));

    test('two purgers at once MUST together delete each expired record exactly once', () =>
      withStore(makeStore, async ({ store, instances }) => {
        const total = 40;
        const records = await seed(
          store,
          Array.from({ length: total }, (_, i) => i),
        );
        const [first, second] = (await instances(2)) as [IdempotencyStore, IdempotencyStore];
        const drain = async (purger: IdempotencyStore) => {
          let sum = 0;
          for (;;) {
            const count = await purger.purgeExpired({ beforeMs: PURGE_BASE_MS + total, limit: 4 });
            sum += count;
            if (count === 0) return sum;
          }
        };
        const [a, b] = await Promise.all([drain(first), drain(second)]);
        assert.equal(a + b, total);
        for (const { ref } of records) assert.equal(await store.load(ref), undefined);
      }));
  });
};

const announced = new Set<string>();

/** What replaces the purge-count tests for a store that declared native expiry. Never a silent skip. */
function nativeExpiryTests(harness: TestHarness, makeStore: MakeStore, reason: string): void {
  const { describe, test } = harness;
  const why = `native expiry: ${reason}`;
  // Said once per reason and process: the group's name says it again on every run.
  if (!announced.has(reason)) {
    announced.add(reason);
    console.info(
      `@idem/store-conformance: the purge-count tests (${PURGE_COUNT_TESTS.join('; ')}) are replaced for this ` +
        `store by the native-expiry tests, because it declared ${why}`,
    );
  }
  describe(`expiry (native; replaces the ${PURGE_COUNT_TESTS.length} purge-count tests: ${why})`, () => {
    test('purgeExpired MUST return a count and MUST NOT delete a record with expiresAtMs >= beforeMs', () =>
      withStore(makeStore, async ({ store }) => {
        const live = freshRef();
        const inFlight = freshRef();
        const first = reserveAt(live, BASE_MS, { expiresAtMs: BASE_MS + 1_000 });
        await store.reserve(first);
        await store.finalize({
          ...live,
          owner: first.owner,
          response: jsonResponse(200, {}),
          nowMs: BASE_MS,
        });
        const second = await store.reserve(reserveAt(inFlight, BASE_MS, { expiresAtMs: BASE_MS + 1_000 }));
        const before = await store.load(live);
        const count = await store.purgeExpired({ beforeMs: BASE_MS + 1_000, limit: 100 });
        assert.ok(Number.isSafeInteger(count) && count >= 0, `purgeExpired returned ${count}`);
        assert.deepEqual(await store.load(live), before, 'a completed record that has not expired MUST stay');
        assert.deepEqual(await store.load(inFlight), second.record, 'an in-flight one MUST stay too');
      }));

    test('a completed record whose expiresAtMs <= nowMs MUST be replaced by reserve and never replayed', () =>
      withStore(makeStore, async ({ store }) => {
        const expiresAtMs = BASE_MS + 50;
        for (const [nowMs, when] of [
          [expiresAtMs, 'at expiresAtMs'],
          [expiresAtMs + 10_000, 'long after'],
        ] as const) {
          const ref = freshRef();
          const first = reserveAt(ref, BASE_MS, { expiresAtMs });
          await store.reserve(first);
          const response = jsonResponse(201, { n: 1 });
          await store.finalize({ ...ref, owner: first.owner, response, nowMs: BASE_MS });
          const justBefore = await store.reserve(reserveAt(ref, expiresAtMs - 1));
          assert.deepEqual(justBefore.record.response, response, 'one millisecond before expiry it replays');
          await store.purgeExpired({ beforeMs: nowMs + 1, limit: 100 });
          const again = reserveAt(ref, nowMs);
          const result = await store.reserve(again);
          assert.equal(result.outcome, 'reserved', `${when}: an expired record MUST NOT be replayed`);
          assert.equal(result.outcome === 'reserved' && result.tookOver, false, `${when}: a new record`);
          assert.equal(result.record.response, null, `${when}: the new record is in flight`);
          assert.equal(result.record.owner, again.owner);
          assert.equal(result.record.createdAtMs, nowMs);
          const loaded = await store.load(ref);
          assert.equal(loaded?.owner, again.owner, `${when}: load sees the new reservation`);
          assert.equal(loaded?.response, null, `${when}: load MUST NOT see the old answer`);
        }
      }));

    test('an in-flight record whose expiresAtMs <= nowMs MUST be replaced by reserve, whatever its fingerprint', () =>
      withStore(makeStore, async ({ store }) => {
        const ref = freshRef();
        const expiresAtMs = BASE_MS + 50;
        await store.reserve(reserveAt(ref, BASE_MS, { expiresAtMs, leaseUntilMs: BASE_MS + 10_000 }));
        const next = reserveAt(ref, expiresAtMs, { fingerprint: fingerprintOf('other') });
        const result = await store.reserve(next);
        assert.equal(result.outcome, 'reserved');
        assert.equal(result.outcome === 'reserved' && result.tookOver, false);
        assert.equal(result.record.fingerprint, next.fingerprint);
        assert.equal(result.record.expiresAtMs, next.expiresAtMs);
        assert.deepEqual(await store.load(ref), result.record);
      }));
  });
}
