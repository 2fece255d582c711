import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { IdempotencyStore, ReserveResult } from '@idem/core';
import {
  BASE_MS,
  type ConformanceGroup,
  freshRef,
  jsonResponse,
  LEASE_MS,
  reserveAt,
  resolveOptions,
  withStore,
} from '../harness.js';

function winners(results: readonly ReserveResult[]): ReserveResult[] {
  return results.filter((result) => result.outcome === 'reserved');
}

/** Races over separate store instances that share one backend. Never retried: a flaky race is a bug. */
export const concurrencyGroup: ConformanceGroup = (harness, makeStore, options) => {
  const { describe, test } = harness;
  const { concurrency, instances: instanceCount } = resolveOptions(options);
  const spread = (stores: IdempotencyStore[], i: number) => stores[i % stores.length] as IdempotencyStore;

  describe('concurrency', () => {
    test(`exactly one of ${concurrency} parallel reserves of a fresh key MUST get reserved`, () =>
      withStore(makeStore, async ({ instances }) => {
        const stores = await instances(instanceCount);
        const ref = freshRef();
        const results = await Promise.all(
          Array.from({ length: concurrency }, (_, i) => spread(stores, i).reserve(reserveAt(ref, BASE_MS))),
        );
        const won = winners(results);
        assert.equal(won.length, 1, `${won.length} callers got reserved`);
        const owner = won[0]?.record.owner;
        for (const result of results) {
          assert.equal(result.record.owner, owner, 'every loser MUST see the winner as the owner');
        }
      }));

    test(`exactly one of ${concurrency} parallel takeovers of a lapsed lease MUST get reserved`, () =>
      withStore(makeStore, async ({ store, instances }) => {
        const ref = freshRef();
        const first = reserveAt(ref, BASE_MS);
        await store.reserve(first);
        const stores = await instances(instanceCount);
        const laterMs = BASE_MS + LEASE_MS;
        const results = await Promise.all(
          Array.from({ length: concurrency }, (_, i) => spread(stores, i).reserve(reserveAt(ref, laterMs))),
        );
        const won = winners(results);
        assert.equal(won.length, 1, `${won.length} callers took over`);
        assert.equal(won[0]?.outcome === 'reserved' && won[0].tookOver, true);
      }));

    test(`exactly one of ${concurrency} parallel reserves of an expired record MUST replace it`, () =>
      withStore(makeStore, async ({ store, instances }) => {
        const ref = freshRef();
        const first = reserveAt(ref, BASE_MS, { expiresAtMs: BASE_MS + 10 });
        await store.reserve(first);
        await store.finalize({ ...ref, owner: first.owner, response: jsonResponse(200, {}), nowMs: BASE_MS });
        const stores = await instances(instanceCount);
        const results = await Promise.all(
          Array.from({ length: concurrency }, (_, i) =>
            spread(stores, i).reserve(reserveAt(ref, BASE_MS + 10)),
          ),
        );
        assert.equal(winners(results).length, 1);
      }));

    test('a finalize racing a takeover MUST leave exactly one winner', () =>
      withStore(makeStore, async ({ store, instances }) => {
        const [a, b] = (await instances(2)) as [IdempotencyStore, IdempotencyStore];
        const rounds = 20;
        const outcomes = await Promise.all(
          Array.from({ length: rounds }, async () => {
            const ref = freshRef();
            const old = reserveAt(ref, BASE_MS);
            await store.reserve(old);
            const nowMs = old.leaseUntilMs + 1;
            const takeover = reserveAt(ref, nowMs, { owner: randomUUID() });
            const [finalized, reserved] = await Promise.all([
              a.finalize({ ...ref, owner: old.owner, response: jsonResponse(200, {}), nowMs }),
              b.reserve(takeover),
            ]);
            const record = await store.load(ref);
            if (finalized) {
              assert.equal(reserved.outcome, 'exists', 'finalize won, so the takeover MUST NOT');
              assert.notEqual(record?.response, null);
            } else {
              assert.equal(reserved.outcome, 'reserved', 'finalize lost, so the takeover MUST have won');
              assert.equal(record?.owner, takeover.owner);
              assert.equal(record?.response, null);
            }
            return finalized;
          }),
        );
        assert.equal(outcomes.length, rounds);
      }));

    test('a release racing a reserve MUST leave the key either free or held by exactly one new owner', () =>
      withStore(makeStore, async ({ store, instances }) => {
        const stores = await instances(instanceCount);
        const ref = freshRef();
        const first = reserveAt(ref, BASE_MS);
        await store.reserve(first);
        const [released, ...results] = await Promise.all([
          store.release({ ...ref, owner: first.owner }),
          ...Array.from({ length: concurrency }, (_, i) =>
            spread(stores, i).reserve(reserveAt(ref, BASE_MS + 1)),
          ),
        ]);
        assert.equal(released, true);
        const won = winners(results as ReserveResult[]);
        assert.ok(won.length <= 1, `${won.length} callers got reserved after one release`);
        const record = await store.load(ref);
        assert.equal(record?.owner, won[0]?.record.owner);
      }));
  });
};
