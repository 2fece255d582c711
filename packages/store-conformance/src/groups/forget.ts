import assert from 'node:assert/strict';
import {
  type ConformanceGroup,
  fingerprintOf,
  freshRef,
  jsonResponse,
  LEASE_MS,
  reserveAt,
  resolveOptions,
  withStore,
} from '../harness.js';
import { methodOf, optionalMethodGroup } from './optional-method.js';
import { AT_MS, seed } from './seed-records.js';

/**
 * `forget` (optional) deletes one record whatever its state and owner, and nothing else: an operator's way to
 * let a key execute again.
 */
export const forgetGroup: ConformanceGroup = (harness, makeStore, options) => {
  const { describe, test } = harness;
  const { nativeExpiry } = resolveOptions(options);
  optionalMethodGroup(harness, makeStore, options, 'forget', () =>
    describe('forget', () => {
      test('forget MUST delete an in-flight record, whoever owns it, and return true', () =>
        withStore(makeStore, async ({ store }) => {
          const forget = methodOf(store, 'forget');
          for (const state of ['in-flight', 'lapsed'] as const) {
            const ref = freshRef();
            await seed(store, ref, state);
            assert.equal(await forget(ref), true, `${state}: forget answers true`);
            assert.equal(await store.load(ref), undefined, `${state}: the record is gone`);
          }
        }));

      test('forget MUST delete a completed record and return true', () =>
        withStore(makeStore, async ({ store }) => {
          const forget = methodOf(store, 'forget');
          const ref = freshRef();
          await seed(store, ref, 'completed');
          assert.equal(await forget(ref), true);
          assert.equal(await store.load(ref), undefined);
          const again = await store.reserve(reserveAt(ref, AT_MS));
          assert.equal(again.outcome, 'reserved', 'a forgotten answer MUST NOT be replayed');
          assert.equal(again.record.response, null);
        }));

      test('forget MUST delete an expired record that is still stored, in flight or completed', () =>
        withStore(makeStore, async ({ store }) => {
          const forget = methodOf(store, 'forget');
          for (const state of ['expired-completed', 'expired-in-flight'] as const) {
            const ref = freshRef();
            await seed(store, ref, state);
            // A backend that expires records itself may have let it go already: then there is nothing to forget.
            const present = nativeExpiry === undefined || (await store.load(ref)) !== undefined;
            assert.equal(await forget(ref), present, `${state}: forget answers whether it deleted a record`);
            assert.equal(await store.load(ref), undefined, `${state}: the record is gone`);
          }
        }));

      test('forget of a record that does not exist MUST return false and create nothing', () =>
        withStore(makeStore, async ({ store }) => {
          const forget = methodOf(store, 'forget');
          const ref = freshRef();
          assert.equal(await forget(ref), false);
          assert.equal(await store.load(ref), undefined);
          await seed(store, ref, 'completed');
          assert.equal(await forget(ref), true);
          assert.equal(await forget(ref), false, 'a second forget finds nothing');
        }));

      test('forget MUST delete only its (scope, key): the key in another scope and the scope’s other keys stay', () =>
        withStore(makeStore, async ({ store }) => {
          const forget = methodOf(store, 'forget');
          const { scope, key } = freshRef();
          // Neighbours a LIKE pattern, a prefix match or a case-insensitive comparison would reach.
          const target = { scope, key: `${key}%_` };
          const neighbours = [
            { scope: `${scope}-other`, key: target.key },
            { scope: scope.toUpperCase(), key: target.key },
            { scope: `${scope}%`, key: target.key },
            { scope, key: `${key}%_x` },
            { scope, key: `${key}ab` },
            { scope, key: `${key}%_`.toUpperCase() },
            { scope, key },
          ];
          await seed(store, target, 'completed');
          const before = [];
          for (const [i, ref] of neighbours.entries()) {
            before.push(await seed(store, ref, i % 2 === 0 ? 'completed' : 'in-flight'));
          }
          assert.equal(await forget(target), true);
          assert.equal(await store.load(target), undefined);
          for (const [i, ref] of neighbours.entries()) {
            assert.deepEqual(await store.load(ref), before[i], `${JSON.stringify(ref)} MUST stay as it was`);
          }
        }));

      test('after forget, reserve MUST create the record afresh and the old owner MUST be fenced out', () =>
        withStore(makeStore, async ({ store }) => {
          const forget = methodOf(store, 'forget');
          const ref = freshRef();
          const old = reserveAt(ref, AT_MS, { leaseUntilMs: AT_MS + LEASE_MS });
          await store.reserve(old);
          assert.equal(await forget(ref), true);
          const nowMs = AT_MS + 1;
          // Another fingerprint is fine: the forgotten record binds nothing any more.
          const next = reserveAt(ref, nowMs, { fingerprint: fingerprintOf('b') });
          const result = await store.reserve(next);
          assert.equal(result.outcome, 'reserved');
          assert.equal(result.outcome === 'reserved' && result.tookOver, false, 'a new record, no takeover');
          assert.equal(result.record.owner, next.owner);
          assert.equal(result.record.createdAtMs, nowMs);
          assert.equal(result.record.expiresAtMs, next.expiresAtMs);
          const response = jsonResponse(200, { stale: true });
          assert.equal(
            await store.finalize({ ...ref, owner: old.owner, response, nowMs }),
            false,
            "the forgotten owner's finalize MUST answer false",
          );
          assert.equal(
            await store.renewLease({ ...ref, owner: old.owner, leaseUntilMs: nowMs + 2 * LEASE_MS }),
            false,
          );
          assert.equal(await store.release({ ...ref, owner: old.owner }), false);
          assert.deepEqual(await store.load(ref), result.record, 'the new reservation is untouched');
          // And a forgotten owner whose record was not reserved again finds nothing to finalize.
          const lone = freshRef();
          const alone = reserveAt(lone, nowMs);
          await store.reserve(alone);
          assert.equal(await forget(lone), true);
          assert.equal(
            await store.finalize({ ...lone, owner: alone.owner, response, nowMs: nowMs + 1 }),
            false,
          );
          assert.equal(await store.load(lone), undefined, 'a fenced finalize MUST NOT bring the record back');
        }));
    }),
  );
};
