import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import {
  BASE_MS,
  type ConformanceGroup,
  freshRef,
  jsonResponse,
  LEASE_MS,
  reserveAt,
  withStore,
} from '../harness.js';

/** finalize / release / renewLease are owner-fenced. */
export const fencingGroup: ConformanceGroup = (harness, makeStore) => {
  const { describe, test } = harness;
  describe('fencing', () => {
    test('finalize by the owner MUST store the response, complete the record and clear its owner', () =>
      withStore(makeStore, async ({ store }) => {
        const ref = freshRef();
        const params = reserveAt(ref, BASE_MS);
        await store.reserve(params);
        const response = jsonResponse(201, { ok: true });
        assert.equal(
          await store.finalize({ ...ref, owner: params.owner, response, nowMs: BASE_MS + 1 }),
          true,
        );
        const record = await store.load(ref);
        assert.deepEqual(record?.response, response);
        assert.equal(record?.owner, null);
        assert.equal(record?.fingerprint, params.fingerprint);
        assert.equal(record?.createdAtMs, BASE_MS);
        assert.equal(record?.expiresAtMs, params.expiresAtMs);
      }));

    test('finalize with another owner MUST return false and change nothing', () =>
      withStore(makeStore, async ({ store }) => {
        const ref = freshRef();
        const params = reserveAt(ref, BASE_MS);
        const { record } = await store.reserve(params);
        const finalized = await store.finalize({
          ...ref,
          owner: randomUUID(),
          response: jsonResponse(200, {}),
          nowMs: BASE_MS + 1,
        });
        assert.equal(finalized, false);
        assert.deepEqual(await store.load(ref), record);
      }));

    test('finalize twice by the owner MUST be harmless: the second returns false, the first response stays', () =>
      withStore(makeStore, async ({ store }) => {
        const ref = freshRef();
        const params = reserveAt(ref, BASE_MS);
        await store.reserve(params);
        const first = jsonResponse(200, { n: 1 });
        assert.equal(
          await store.finalize({ ...ref, owner: params.owner, response: first, nowMs: BASE_MS }),
          true,
        );
        const second = jsonResponse(200, { n: 2 });
        assert.equal(
          await store.finalize({ ...ref, owner: params.owner, response: second, nowMs: BASE_MS }),
          false,
        );
        assert.deepEqual((await store.load(ref))?.response, first);
      }));

    test('finalize of a record that does not exist MUST return false and create nothing', () =>
      withStore(makeStore, async ({ store }) => {
        const ref = freshRef();
        const finalized = await store.finalize({
          ...ref,
          owner: randomUUID(),
          response: jsonResponse(200, {}),
          nowMs: BASE_MS,
        });
        assert.equal(finalized, false);
        assert.equal(await store.load(ref), undefined);
      }));

    test('release by the owner MUST delete the reservation so the key can be reserved again', () =>
      withStore(makeStore, async ({ store }) => {
        const ref = freshRef();
        const params = reserveAt(ref, BASE_MS);
        await store.reserve(params);
        assert.equal(await store.release({ ...ref, owner: params.owner }), true);
        assert.equal(await store.load(ref), undefined);
        const again = await store.reserve(reserveAt(ref, BASE_MS + 1));
        assert.equal(again.outcome, 'reserved');
        assert.equal(
          await store.release({ ...ref, owner: params.owner }),
          false,
          'a second release is fenced',
        );
      }));

    test('release with another owner MUST return false and keep the reservation', () =>
      withStore(makeStore, async ({ store }) => {
        const ref = freshRef();
        const { record } = await store.reserve(reserveAt(ref, BASE_MS));
        assert.equal(await store.release({ ...ref, owner: randomUUID() }), false);
        assert.deepEqual(await store.load(ref), record);
      }));

    test('release MUST NOT delete a completed record, not even for its last owner', () =>
      withStore(makeStore, async ({ store }) => {
        const ref = freshRef();
        const params = reserveAt(ref, BASE_MS);
        await store.reserve(params);
        const response = jsonResponse(200, {});
        await store.finalize({ ...ref, owner: params.owner, response, nowMs: BASE_MS });
        assert.equal(await store.release({ ...ref, owner: params.owner }), false);
        assert.deepEqual((await store.load(ref))?.response, response);
      }));

    test('renewLease by the owner MUST extend the lease; by anyone else MUST return false', () =>
      withStore(makeStore, async ({ store }) => {
        const ref = freshRef();
        const params = reserveAt(ref, BASE_MS);
        await store.reserve(params);
        const leaseUntilMs = BASE_MS + 5 * LEASE_MS;
        assert.equal(
          await store.renewLease({ ...ref, owner: randomUUID(), leaseUntilMs: leaseUntilMs * 2 }),
          false,
        );
        assert.equal(await store.renewLease({ ...ref, owner: params.owner, leaseUntilMs }), true);
        assert.equal((await store.load(ref))?.leaseUntilMs, leaseUntilMs);
        const taken = await store.reserve(reserveAt(ref, BASE_MS + 2 * LEASE_MS));
        assert.equal(taken.outcome, 'exists', 'a renewed lease MUST NOT be taken over');
      }));

    test('renewLease MUST return false for a completed or missing record', () =>
      withStore(makeStore, async ({ store }) => {
        const ref = freshRef();
        const params = reserveAt(ref, BASE_MS);
        assert.equal(
          await store.renewLease({ ...ref, owner: params.owner, leaseUntilMs: BASE_MS + 1 }),
          false,
        );
        assert.equal(await store.load(ref), undefined);
        await store.reserve(params);
        await store.finalize({
          ...ref,
          owner: params.owner,
          response: jsonResponse(200, {}),
          nowMs: BASE_MS,
        });
        const before = await store.load(ref);
        assert.equal(
          await store.renewLease({ ...ref, owner: params.owner, leaseUntilMs: BASE_MS + 9 }),
          false,
        );
        assert.deepEqual(await store.load(ref), before);
      }));

    test('after a takeover the previous owner MUST be fenced out of finalize, release and renewLease', () =>
      withStore(makeStore, async ({ store }) => {
        const ref = freshRef();
        const old = reserveAt(ref, BASE_MS);
        await store.reserve(old);
        const takeover = await store.reserve(reserveAt(ref, old.leaseUntilMs));
        assert.equal(takeover.outcome, 'reserved');
        const nowMs = old.leaseUntilMs + 1;
        assert.equal(
          await store.renewLease({ ...ref, owner: old.owner, leaseUntilMs: nowMs + LEASE_MS }),
          false,
        );
        assert.equal(await store.release({ ...ref, owner: old.owner }), false);
        assert.equal(
          await store.finalize({ ...ref, owner: old.owner, response: jsonResponse(200, {}), nowMs }),
          false,
        );
        assert.deepEqual(await store.load(ref), takeover.record);
      }));
  });
};
