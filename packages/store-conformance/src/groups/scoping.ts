import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import {
  BASE_MS,
  type ConformanceGroup,
  fingerprintOf,
  jsonResponse,
  reserveAt,
  withStore,
} from '../harness.js';

/** The same key in two scopes is two unrelated records. */
export const scopingGroup: ConformanceGroup = (harness, makeStore) => {
  const { describe, test } = harness;
  describe('scoping', () => {
    test('the same key in two scopes MUST be two independent records', () =>
      withStore(makeStore, async ({ store }) => {
        const key = randomUUID();
        const a = { scope: `tenant-a-${randomUUID()}`, key };
        const b = { scope: `tenant-b-${randomUUID()}`, key };
        const inA = reserveAt(a, BASE_MS, { fingerprint: fingerprintOf('a') });
        const inB = reserveAt(b, BASE_MS, { fingerprint: fingerprintOf('b') });
        assert.equal((await store.reserve(inA)).outcome, 'reserved');
        assert.equal(
          (await store.reserve(inB)).outcome,
          'reserved',
          'a key reserved in one scope is free in another',
        );
        const response = jsonResponse(200, { for: 'a' });
        assert.equal(await store.finalize({ ...a, owner: inA.owner, response, nowMs: BASE_MS }), true);
        assert.equal((await store.load(b))?.response, null, "finalizing in A MUST NOT complete B's record");
        assert.equal(await store.release({ ...b, owner: inB.owner }), true);
        assert.deepEqual(
          (await store.load(a))?.response,
          response,
          "releasing in B MUST NOT touch A's record",
        );
        assert.equal(await store.load(b), undefined);
      }));

    test('scope and key MUST NOT run together: (ab, c) and (a, bc) are different records', () =>
      withStore(makeStore, async ({ store }) => {
        const prefix = randomUUID();
        const first = { scope: `${prefix}ab`, key: 'c-key' };
        const second = { scope: `${prefix}a`, key: 'bc-key' };
        const secondSwapped = { scope: `${prefix}abc`, key: '-key' };
        assert.equal((await store.reserve(reserveAt(first, BASE_MS))).outcome, 'reserved');
        assert.equal((await store.reserve(reserveAt(second, BASE_MS))).outcome, 'reserved');
        assert.equal((await store.reserve(reserveAt(secondSwapped, BASE_MS))).outcome, 'reserved');
      }));

    test('the empty scope MUST be a scope like any other', () =>
      withStore(makeStore, async ({ store }) => {
        const key = randomUUID();
        assert.equal((await store.reserve(reserveAt({ scope: '', key }, BASE_MS))).outcome, 'reserved');
        assert.equal((await store.reserve(reserveAt({ scope: 'x', key }, BASE_MS))).outcome, 'reserved');
        assert.equal((await store.load({ scope: '', key }))?.scope, '');
      }));
  });
};
