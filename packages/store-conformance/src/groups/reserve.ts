import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import {
  BASE_MS,
  type ConformanceGroup,
  fingerprintOf,
  freshRef,
  jsonResponse,
  LEASE_MS,
  LIFETIME_MS,
  reserveAt,
  withStore,
} from '../harness.js';

/** reserve: creation, exists, expiry replacement, lease takeover. */
export const reserveGroup: ConformanceGroup = (harness, makeStore) => {
  const { describe, test } = harness;
  describe('reserve', () => {
    test('reserve MUST return reserved with the new record for a fresh key', () =>
      withStore(makeStore, async ({ store }) => {
        const ref = freshRef();
        const params = reserveAt(ref, BASE_MS);
        const result = await store.reserve(params);
        assert.equal(result.outcome, 'reserved');
        assert.equal(result.outcome === 'reserved' && result.tookOver, false);
        assert.deepEqual(result.record, {
          scope: ref.scope,
          key: ref.key,
          fingerprint: params.fingerprint,
          owner: params.owner,
          leaseUntilMs: params.leaseUntilMs,
          response: null,
          createdAtMs: BASE_MS,
          expiresAtMs: params.expiresAtMs,
        });
        assert.deepEqual(await store.load(ref), result.record);
      }));

    test('times MUST be kept to the millisecond: a lease that lapses at T+1 ms holds at T and is taken over at T+1', () =>
      withStore(makeStore, async ({ store }) => {
        const ref = freshRef();
        const first = reserveAt(ref, BASE_MS, { leaseUntilMs: BASE_MS + 1, expiresAtMs: BASE_MS + 7 });
        await store.reserve(first);
        const record = await store.load(ref);
        assert.equal(record?.createdAtMs, BASE_MS);
        assert.equal(record?.leaseUntilMs, BASE_MS + 1);
        assert.equal(record?.expiresAtMs, BASE_MS + 7);
        assert.equal((await store.reserve(reserveAt(ref, BASE_MS))).outcome, 'exists');
        const later = await store.reserve(reserveAt(ref, BASE_MS + 1));
        assert.equal(later.outcome === 'reserved' && later.tookOver, true);
      }));

    test('a takeover in the millisecond the record was created MUST be reported as one (tookOver, createdAtMs kept)', () =>
      withStore(makeStore, async ({ store }) => {
        const ref = freshRef();
        // A lease that lapses as it starts, and a retry in the same millisecond with the same lifetime: the
        // taken-over record looks exactly like a new one, and only the store knows which it did.
        const created = reserveAt(ref, BASE_MS, { leaseUntilMs: BASE_MS });
        await store.reserve(created);
        const retry = reserveAt(ref, BASE_MS);
        const result = await store.reserve(retry);
        assert.equal(result.outcome, 'reserved');
        assert.equal(result.outcome === 'reserved' && result.tookOver, true);
        assert.equal(result.record.owner, retry.owner);
        assert.equal(result.record.createdAtMs, BASE_MS);
        assert.equal(result.record.expiresAtMs, created.expiresAtMs);
      }));

    test('an expired record replaced in the millisecond it was created MUST be reported as new (tookOver false)', () =>
      withStore(makeStore, async ({ store }) => {
        const ref = freshRef();
        await store.reserve(reserveAt(ref, BASE_MS, { leaseUntilMs: BASE_MS, expiresAtMs: BASE_MS }));
        const retry = reserveAt(ref, BASE_MS);
        const result = await store.reserve(retry);
        assert.equal(result.outcome === 'reserved' && result.tookOver, false);
        assert.deepEqual(await store.load(ref), result.outcome === 'reserved' ? result.record : undefined);
        assert.equal(result.record.expiresAtMs, retry.expiresAtMs);
      }));

    test('load MUST return undefined for a key never reserved', () =>
      withStore(makeStore, async ({ store }) => {
        assert.equal(await store.load(freshRef()), undefined);
      }));

    test('a second reserve MUST return exists with the current record and change nothing', () =>
      withStore(makeStore, async ({ store }) => {
        const ref = freshRef();
        const first = await store.reserve(reserveAt(ref, BASE_MS));
        const second = await store.reserve(reserveAt(ref, BASE_MS + 1));
        assert.equal(second.outcome, 'exists');
        assert.deepEqual(second.record, first.record);
        assert.deepEqual(await store.load(ref), first.record);
      }));

    test('a completed record MUST come back as exists with its response, even long after its lease', () =>
      withStore(makeStore, async ({ store }) => {
        const ref = freshRef();
        const params = reserveAt(ref, BASE_MS);
        await store.reserve(params);
        const response = jsonResponse(201, { id: 1 });
        assert.equal(
          await store.finalize({ ...ref, owner: params.owner, response, nowMs: BASE_MS + 5 }),
          true,
        );
        const again = await store.reserve(reserveAt(ref, BASE_MS + LEASE_MS * 10));
        assert.equal(again.outcome, 'exists');
        assert.deepEqual(again.record.response, response);
        assert.equal(again.record.owner, null);
      }));

    test('an expired record MUST be replaced, whatever its fingerprint', () =>
      withStore(makeStore, async ({ store }) => {
        const ref = freshRef();
        const first = reserveAt(ref, BASE_MS);
        await store.reserve(first);
        await store.finalize({
          ...ref,
          owner: first.owner,
          response: jsonResponse(200, {}),
          nowMs: BASE_MS + 1,
        });
        const laterMs = first.expiresAtMs;
        const next = reserveAt(ref, laterMs, { fingerprint: fingerprintOf('b') });
        const result = await store.reserve(next);
        assert.equal(result.outcome, 'reserved');
        assert.equal(result.outcome === 'reserved' && result.tookOver, false);
        assert.equal(result.record.fingerprint, next.fingerprint);
        assert.equal(result.record.owner, next.owner);
        assert.equal(result.record.response, null);
        assert.equal(result.record.createdAtMs, laterMs);
        assert.equal(result.record.expiresAtMs, next.expiresAtMs);
      }));

    test('an expired in-flight record MUST be replaced as well', () =>
      withStore(makeStore, async ({ store }) => {
        const ref = freshRef();
        const first = reserveAt(ref, BASE_MS, { expiresAtMs: BASE_MS + 10, leaseUntilMs: BASE_MS + 100 });
        await store.reserve(first);
        const result = await store.reserve(reserveAt(ref, BASE_MS + 10, { fingerprint: fingerprintOf('c') }));
        assert.equal(result.outcome, 'reserved');
        assert.equal(result.record.fingerprint, fingerprintOf('c'));
      }));

    test('a lapsed lease with the same fingerprint MUST be taken over, keeping createdAtMs and expiresAtMs', () =>
      withStore(makeStore, async ({ store }) => {
        const ref = freshRef();
        const first = reserveAt(ref, BASE_MS);
        const created = await store.reserve(first);
        const laterMs = first.leaseUntilMs;
        const next = reserveAt(ref, laterMs, { owner: randomUUID() });
        const result = await store.reserve(next);
        assert.equal(result.outcome, 'reserved');
        assert.equal(result.outcome === 'reserved' && result.tookOver, true);
        assert.deepEqual(result.record, {
          ...created.record,
          owner: next.owner,
          leaseUntilMs: next.leaseUntilMs,
        });
        assert.deepEqual(await store.load(ref), result.record);
        assert.equal(
          await store.finalize({
            ...ref,
            owner: first.owner,
            response: jsonResponse(200, {}),
            nowMs: laterMs,
          }),
          false,
          'the previous owner MUST lose its reservation',
        );
      }));

    test('a live lease MUST NOT be taken over', () =>
      withStore(makeStore, async ({ store }) => {
        const ref = freshRef();
        const first = reserveAt(ref, BASE_MS);
        await store.reserve(first);
        const result = await store.reserve(reserveAt(ref, first.leaseUntilMs - 1));
        assert.equal(result.outcome, 'exists');
        assert.equal(result.record.owner, first.owner);
      }));

    test('a lapsed lease with another fingerprint MUST stay put', () =>
      withStore(makeStore, async ({ store }) => {
        const ref = freshRef();
        const first = reserveAt(ref, BASE_MS);
        await store.reserve(first);
        const result = await store.reserve(
          reserveAt(ref, BASE_MS + LEASE_MS + 1, { fingerprint: fingerprintOf('other') }),
        );
        assert.equal(result.outcome, 'exists');
        assert.equal(result.record.owner, first.owner);
        assert.equal(result.record.fingerprint, first.fingerprint);
        assert.equal((await store.load(ref))?.owner, first.owner);
      }));

    test('a completed record within its lifetime MUST NOT be replaced by another fingerprint', () =>
      withStore(makeStore, async ({ store }) => {
        const ref = freshRef();
        const first = reserveAt(ref, BASE_MS);
        await store.reserve(first);
        await store.finalize({ ...ref, owner: first.owner, response: jsonResponse(200, {}), nowMs: BASE_MS });
        const result = await store.reserve(
          reserveAt(ref, BASE_MS + LIFETIME_MS - 1, { fingerprint: fingerprintOf('other') }),
        );
        assert.equal(result.outcome, 'exists');
        assert.equal(result.record.fingerprint, first.fingerprint);
      }));
  });
};
