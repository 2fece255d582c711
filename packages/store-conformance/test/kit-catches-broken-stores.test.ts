import { setImmediate as tick } from 'node:timers/promises';
import type { IdempotencyRecord, IdempotencyStore } from '@idem/core';
import {
  type ConformanceGroup,
  type ConformanceOptions,
  conformanceGroups,
  type TestHarness,
} from '@idem/store-conformance';
import { describe, expect, test } from 'vitest';
import { createReferenceStore, decideReserve } from './support/reference-store.js';

type GroupName = keyof typeof conformanceGroups;

/** Run one group of the kit against a store with a collecting harness; return the names of failed tests. */
async function failuresOf(
  group: ConformanceGroup,
  makeStore: () => IdempotencyStore,
  options: ConformanceOptions = {},
): Promise<{ failed: string[]; names: string[] }> {
  const tests: { name: string; body: () => Promise<void> }[] = [];
  const path: string[] = [];
  const harness: TestHarness = {
    describe(name, body) {
      path.push(name);
      body();
      path.pop();
    },
    test(name, body) {
      tests.push({ name: [...path, name].join(' > '), body });
    },
  };
  group(harness, () => ({ store: makeStore() }), { concurrency: 20, ...options });
  expect(tests.length).toBeGreaterThan(0);
  const failed: string[] = [];
  for (const { name, body } of tests) {
    await body().catch(() => failed.push(name));
  }
  return { failed, names: tests.map((t) => t.name) };
}

const id = (scope: string, key: string) => JSON.stringify([scope, key]);

// Each broken store carries one bug seen in real idempotency libraries, and the group that must catch it.
const brokenStores: [string, GroupName, RegExp, () => IdempotencyStore][] = [
  [
    'a find-then-insert reserve (not atomic)',
    'concurrency',
    /parallel reserves of a fresh key/,
    () =>
      createReferenceStore((records) => ({
        async reserve(p) {
          const existing = records.get(id(p.scope, p.key));
          await tick(); // another request gets in here
          const result = decideReserve(existing, p);
          if (result.outcome === 'reserved') records.set(id(p.scope, p.key), result.record);
          return result;
        },
      })),
  ],
  [
    'an unfenced finalize (ignores the owner)',
    'fencing',
    /finalize with another owner/,
    () =>
      createReferenceStore((records) => ({
        async finalize({ scope, key, response }) {
          const record = records.get(id(scope, key));
          if (record === undefined) return false;
          records.set(id(scope, key), { ...record, owner: null, response });
          return true;
        },
      })),
  ],
  [
    'a purge that ignores limit',
    'expiry',
    /honour limit/,
    () =>
      createReferenceStore((records) => ({
        async purgeExpired({ beforeMs }) {
          let count = 0;
          for (const [recordId, record] of records) {
            if (record.expiresAtMs < beforeMs && records.delete(recordId)) count++;
          }
          return count;
        },
      })),
  ],
  [
    'a release that deletes completed records',
    'fencing',
    /release MUST NOT delete a completed record/,
    () =>
      createReferenceStore((records) => ({
        async release({ scope, key, owner }) {
          const record = records.get(id(scope, key));
          if (record === undefined || (record.owner !== owner && record.response === null)) return false;
          return records.delete(id(scope, key));
        },
      })),
  ],
  [
    'a takeover that ignores the fingerprint',
    'reserve',
    /lapsed lease with another fingerprint/,
    () =>
      createReferenceStore((records, store) => ({
        async reserve(p) {
          const existing = records.get(id(p.scope, p.key));
          if (existing?.response === null && existing.leaseUntilMs <= p.nowMs) {
            const record = { ...existing, owner: p.owner, leaseUntilMs: p.leaseUntilMs };
            records.set(id(p.scope, p.key), record);
            return { outcome: 'reserved', record, tookOver: true };
          }
          return store.reserve(p);
        },
      })),
  ],
  [
    'global keys (the scope is ignored)',
    'scoping',
    /two independent records/,
    () => {
      const inner = createReferenceStore();
      const global = <T extends { scope: string }>(p: T): T => ({ ...p, scope: 'global' });
      return {
        reserve: (p) =>
          inner.reserve(global(p)).then((r) => ({ ...r, record: { ...r.record, scope: p.scope } })),
        load: (p) => inner.load(global(p)).then((r) => r && { ...r, scope: p.scope }),
        finalize: (p) => inner.finalize(global(p)),
        release: (p) => inner.release(global(p)),
        renewLease: (p) => inner.renewLease(global(p)),
        purgeExpired: (p) => inner.purgeExpired(p),
      };
    },
  ],
  [
    'a store that keeps bodies as UTF-8 text (not binary-safe)',
    'payloads',
    /binary body MUST round-trip/,
    () =>
      createReferenceStore((_records, store) => ({
        async finalize(p) {
          const body =
            p.response.body === null
              ? null
              : new TextEncoder().encode(new TextDecoder().decode(p.response.body));
          return store.finalize({ ...p, response: { ...p.response, body } });
        },
      })),
  ],
  [
    'a takeover that resets createdAtMs and expiresAtMs',
    'reserve',
    /keeping createdAtMs and expiresAtMs/,
    () =>
      createReferenceStore((records, store) => ({
        async reserve(p) {
          const result = await store.reserve(p);
          if (result.outcome === 'reserved' && result.tookOver) {
            const record: IdempotencyRecord = {
              ...result.record,
              createdAtMs: p.nowMs,
              expiresAtMs: p.expiresAtMs,
            };
            records.set(id(p.scope, p.key), record);
            return { ...result, record };
          }
          return result;
        },
      })),
  ],
  [
    'a reserve that tells a takeover from a creation by createdAtMs === nowMs',
    'reserve',
    /takeover in the millisecond the record was created/,
    () =>
      createReferenceStore((_records, store) => ({
        async reserve(p) {
          const result = await store.reserve(p);
          if (result.outcome !== 'reserved') return result;
          return { ...result, tookOver: result.record.createdAtMs !== p.nowMs };
        },
      })),
  ],
  [
    'a store that keeps times in whole seconds',
    'reserve',
    /kept to the millisecond/,
    () => {
      const seconds = (ms: number) => Math.floor(ms / 1000) * 1000;
      return createReferenceStore((_records, store) => ({
        reserve: (p) =>
          store.reserve({
            ...p,
            nowMs: seconds(p.nowMs),
            leaseUntilMs: seconds(p.leaseUntilMs),
            expiresAtMs: seconds(p.expiresAtMs),
          }),
      }));
    },
  ],
];

const nativeExpiry = { nativeExpiry: { reason: 'the backend expires records itself' } };

// A store whose backend expires records itself: purge finds nothing to count.
const nativeStore = () =>
  createReferenceStore(() => ({
    async purgeExpired() {
      return 0;
    },
  }));

// Broken stores that declare native expiry, and the native-expiry test that must catch each.
const brokenNativeStores: [string, RegExp, () => IdempotencyStore][] = [
  [
    'a store that replays an expired record it has not evicted yet',
    /completed record whose expiresAtMs <= nowMs MUST be replaced/,
    () =>
      createReferenceStore((records, store) => ({
        async reserve(p) {
          const existing = records.get(id(p.scope, p.key));
          if (existing?.response != null) return { outcome: 'exists', record: existing };
          return store.reserve(p);
        },
        async purgeExpired() {
          return 0;
        },
      })),
  ],
  [
    'a store that compares expiry with > instead of >= (replays in the millisecond of expiry)',
    /completed record whose expiresAtMs <= nowMs MUST be replaced/,
    () =>
      createReferenceStore((_records, store) => ({
        reserve: (p) => store.reserve({ ...p, nowMs: p.nowMs - 1 }).then((r) => r),
        async purgeExpired() {
          return 0;
        },
      })),
  ],
  [
    'a store whose purge deletes records that have not expired',
    /MUST NOT delete a record with expiresAtMs >= beforeMs/,
    () =>
      createReferenceStore((records) => ({
        async purgeExpired({ beforeMs }) {
          for (const [recordId, record] of records)
            if (record.expiresAtMs <= beforeMs) records.delete(recordId);
          return 0;
        },
      })),
  ],
];

describe('the kit passes a correct store', () => {
  test.each(Object.entries(conformanceGroups))('group %s passes on the reference store', async (_, group) => {
    expect((await failuresOf(group, () => createReferenceStore())).failed).toEqual([]);
  });

  test('the expiry group passes a correct store with native expiry, and names what it replaced', async () => {
    const { failed, names } = await failuresOf(conformanceGroups.expiry, nativeStore, nativeExpiry);
    expect(failed).toEqual([]);
    expect(names.length).toBe(3);
    for (const name of names) {
      expect(name).toContain(
        'replaces the 3 purge-count tests: native expiry: the backend expires records itself',
      );
    }
  });

  test('without nativeExpiry, the purge-count tests fail a store that only has native expiry (no silent pass)', async () => {
    const { failed } = await failuresOf(conformanceGroups.expiry, nativeStore);
    expect(failed.length).toBe(3);
  });
});

describe('the kit fails broken stores, in the matching group', () => {
  test.each(brokenStores)('%s fails the %s group', async (_, groupName, expectedFailure, makeStore) => {
    const { failed } = await failuresOf(conformanceGroups[groupName], makeStore);
    expect(
      failed.some((name) => expectedFailure.test(name)),
      `failed: ${failed.join('; ') || 'none'}`,
    ).toBe(true);
  });

  test.each(brokenNativeStores)(
    'native expiry: %s fails the expiry group',
    async (_, expectedFailure, makeStore) => {
      const { failed } = await failuresOf(conformanceGroups.expiry, makeStore, nativeExpiry);
      expect(
        failed.some((name) => expectedFailure.test(name)),
        `failed: ${failed.join('; ') || 'none'}`,
      ).toBe(true);
    },
  );
});
