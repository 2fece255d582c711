import assert from 'node:assert/strict';
import type { IdempotencyStore, StoreStats } from '@idem/core';
import { BASE_MS, type ConformanceGroup, freshRef, resolveOptions, withStore } from '../harness.js';
import { methodOf, optionalMethodGroup } from './optional-method.js';
import { AT_MS, type SeedState, seed } from './seed-records.js';

const NONE: StoreStats = {
  inFlight: 0,
  leaseLapsed: 0,
  completed: 0,
  expired: 0,
  oldestInFlightCreatedAtMs: null,
};

/** Seed `states` in `scope`, a millisecond apart from `createdAtMs` on, each under a key of its creation time. */
async function seedAll(
  store: IdempotencyStore,
  scope: string,
  states: readonly SeedState[],
  createdAtMs = BASE_MS,
): Promise<void> {
  for (const [i, state] of states.entries()) {
    await seed(store, { scope, key: `k-${createdAtMs + i}` }, state, { createdAtMs: createdAtMs + i });
  }
}

/**
 * `stats` (optional) counts records by state at `nowMs`, lapsed leases among the in-flight ones, and the
 * creation time of the oldest in-flight record.
 */
export const statsGroup: ConformanceGroup = (harness, makeStore, options) => {
  const { describe, test } = harness;
  const { nativeExpiry } = resolveOptions(options);
  /**
   * `actual` MUST equal `expected`, except that a backend that expires records itself may have dropped any of
   * the `expired` records (at most `expected.expired` of them, and never counted under another state).
   */
  const assertStats = (actual: StoreStats, expected: StoreStats, message: string) => {
    if (nativeExpiry === undefined) {
      assert.deepEqual(actual, expected, message);
      return;
    }
    assert.ok(
      Number.isSafeInteger(actual.expired) && actual.expired >= 0 && actual.expired <= expected.expired,
      `${message}: expired is ${actual.expired}, at most ${expected.expired}`,
    );
    assert.deepEqual(actual, { ...expected, expired: actual.expired }, message);
  };

  optionalMethodGroup(harness, makeStore, options, 'stats', () =>
    describe('stats', () => {
      test('stats of a scope with no records MUST count nothing, with oldestInFlightCreatedAtMs null', () =>
        withStore(makeStore, async ({ store }) => {
          const stats = methodOf(store, 'stats');
          assert.deepEqual(await stats({ scope: freshRef().scope, nowMs: AT_MS }), NONE);
        }));

      test('stats MUST count a scope’s records by state at nowMs, an expired record as expired only', () =>
        withStore(makeStore, async ({ store }) => {
          const stats = methodOf(store, 'stats');
          const { scope } = freshRef();
          // The oldest records are an expired in-flight one and a completed one: neither is the oldest in flight.
          await seedAll(store, scope, ['expired-in-flight', 'completed', 'expired-completed', 'completed']);
          await seedAll(store, scope, ['lapsed', 'in-flight', 'in-flight'], BASE_MS + 100);
          assertStats(
            await stats({ scope, nowMs: AT_MS }),
            {
              inFlight: 3,
              leaseLapsed: 1,
              completed: 2,
              expired: 2,
              oldestInFlightCreatedAtMs: BASE_MS + 100,
            },
            'at AT_MS',
          );
        }));

      test('leaseLapsed MUST count in-flight records from leaseUntilMs <= nowMs on, and never an expired one', () =>
        withStore(makeStore, async ({ store }) => {
          const stats = methodOf(store, 'stats');
          const { scope } = freshRef();
          // 'lapsed' leases end at AT_MS, 'in-flight' ones later; 'expired-in-flight' has a live lease but expired.
          await seedAll(store, scope, ['lapsed', 'lapsed', 'in-flight', 'expired-in-flight']);
          const counted = (nowMs: number) => stats({ scope, nowMs });
          assert.equal((await counted(AT_MS - 2)).leaseLapsed, 0, 'a millisecond before the lease ends');
          assert.equal((await counted(AT_MS)).leaseLapsed, 2, 'in the millisecond the lease ends');
          assertStats(
            await counted(AT_MS),
            { inFlight: 3, leaseLapsed: 2, completed: 0, expired: 1, oldestInFlightCreatedAtMs: BASE_MS },
            'at AT_MS',
          );
        }));

      test('stats MUST judge states at the nowMs it is given', () =>
        withStore(makeStore, async ({ store }) => {
          const stats = methodOf(store, 'stats');
          const { scope } = freshRef();
          await seedAll(store, scope, ['expired-in-flight', 'expired-completed', 'lapsed', 'completed']);
          // Two milliseconds before AT_MS nothing has expired or lapsed; the oldest in flight is the first.
          const before = await stats({ scope, nowMs: AT_MS - 2 });
          if (nativeExpiry === undefined) {
            assert.deepEqual(before, {
              inFlight: 2,
              leaseLapsed: 0,
              completed: 2,
              expired: 0,
              oldestInFlightCreatedAtMs: BASE_MS,
            });
          } else {
            // What the backend dropped by itself is gone from every count.
            assert.equal(before.expired, 0);
            assert.equal(before.leaseLapsed, 0);
            assert.ok(
              before.inFlight >= 1 && before.inFlight <= 2 && before.completed >= 1 && before.completed <= 2,
            );
          }
          assertStats(
            await stats({ scope, nowMs: AT_MS }),
            { inFlight: 1, leaseLapsed: 1, completed: 1, expired: 2, oldestInFlightCreatedAtMs: BASE_MS + 2 },
            'at AT_MS',
          );
        }));

      test('stats with a scope MUST count that scope only; without one, every scope', () =>
        withStore(makeStore, async ({ store }) => {
          const stats = methodOf(store, 'stats');
          const { scope } = freshRef();
          const neighbours = [`${scope}%`, `${scope}_`, `${scope}x`, scope.toUpperCase()];
          await seedAll(store, scope, ['in-flight', 'completed']);
          for (const neighbour of neighbours) await seedAll(store, neighbour, ['completed', 'lapsed']);
          assertStats(
            await stats({ scope, nowMs: AT_MS }),
            { inFlight: 1, leaseLapsed: 0, completed: 1, expired: 0, oldestInFlightCreatedAtMs: BASE_MS },
            'the scope alone',
          );
          assertStats(
            await stats({ scope: `${scope}_`, nowMs: AT_MS }),
            { inFlight: 1, leaseLapsed: 1, completed: 1, expired: 0, oldestInFlightCreatedAtMs: BASE_MS + 1 },
            'a scope that is a LIKE pattern matching the others',
          );
          // The backend may hold other tests' records too: every scope counts at least this test's.
          const all = await stats({ nowMs: AT_MS });
          assert.ok(all.inFlight >= 5, `inFlight ${all.inFlight}`);
          assert.ok(all.leaseLapsed >= 4, `leaseLapsed ${all.leaseLapsed}`);
          assert.ok(all.completed >= 5, `completed ${all.completed}`);
          assert.ok(
            all.oldestInFlightCreatedAtMs !== null && all.oldestInFlightCreatedAtMs <= BASE_MS,
            `oldestInFlightCreatedAtMs ${all.oldestInFlightCreatedAtMs}`,
          );
          for (const [name, value] of Object.entries(all)) {
            assert.ok(
              value === null || Number.isSafeInteger(value),
              `${name} MUST be an integer, got ${value}`,
            );
          }
        }));

      test('stats MUST refuse a nowMs that is not an integer with a RangeError', () =>
        withStore(makeStore, async ({ store }) => {
          const stats = methodOf(store, 'stats');
          for (const nowMs of [1.5, Number.NaN, Number.POSITIVE_INFINITY]) {
            await assert.rejects(async () => stats({ nowMs }), RangeError, `nowMs ${nowMs}`);
          }
        }));
    }),
  );
};
