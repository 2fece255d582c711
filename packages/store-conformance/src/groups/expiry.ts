import assert from 'node:assert/strict';
import type { IdempotencyStore } from '@idem/core';
import {
  type ConformanceGroup,
  freshRef,
  jsonResponse,
  PURGE_BASE_MS,
  reserveAt,
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

/** purgeExpired removes exactly the expired records, in bounded batches, safely from several callers. */
export const expiryGroup: ConformanceGroup = (harness, makeStore) => {
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
