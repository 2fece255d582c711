import { setImmediate as tick } from 'node:timers/promises';
import {
  checkListParams,
  decodeRecordCursor,
  encodeRecordCursor,
  type IdempotencyRecord,
  type IdempotencyStore,
  listedBy,
  listedRecord,
  recordStateAt,
  type StatsTally,
} from '@idem/core';
import {
  type ConformanceGroup,
  type ConformanceOptions,
  conformanceGroups,
  type InspectionMethod,
  type TestHarness,
} from '@idem/store-conformance';
import { describe, expect, test, vi } from 'vitest';
import { byRef, createReferenceStore, decideReserve } from './support/reference-store.js';

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
  group(harness, () => ({ store: makeStore() }), { concurrency: 20, inspection: ALL_INSPECTION, ...options });
  expect(tests.length).toBeGreaterThan(0);
  const failed: string[] = [];
  for (const { name, body } of tests) {
    await body().catch(() => failed.push(name));
  }
  return { failed, names: tests.map((t) => t.name) };
}

const id = (scope: string, key: string) => JSON.stringify([scope, key]);

const ALL_INSPECTION: readonly InspectionMethod[] = ['forget', 'list', 'stats'];

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
        reserve: async (p) => {
          const r = await inner.reserve(global(p));
          return { ...r, record: { ...r.record, scope: p.scope } };
        },
        load: async (p) => {
          const r = await inner.load(global(p));
          return r && { ...r, scope: p.scope };
        },
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

type ListParamsOf = Parameters<NonNullable<IdempotencyStore['list']>>[0];

/** The reference store's list with one of its steps replaced by a plausible bug. */
function listWith(
  records: Map<string, IdempotencyRecord>,
  steps: {
    check?: (params: ListParamsOf) => void;
    after?: (cursor: string) => (record: IdempotencyRecord) => boolean;
    keep?: (params: ListParamsOf, record: IdempotencyRecord) => boolean;
    show?: (record: IdempotencyRecord, params: ListParamsOf) => ReturnType<typeof listedRecord>;
    page?: (listed: IdempotencyRecord[], limit: number) => { page: IdempotencyRecord[]; next: string | null };
  } = {},
): NonNullable<IdempotencyStore['list']> {
  const {
    check = checkListParams,
    after = (cursor) => {
      const ref = decodeRecordCursor(cursor);
      return (record) => byRef(record, ref) > 0;
    },
    keep = listedBy,
    show = (record, params) => listedRecord(record, params.bodies === true),
    page = (listed, limit) => {
      const taken = listed.slice(0, limit);
      const last = taken.at(-1);
      return { page: taken, next: listed.length > limit && last ? encodeRecordCursor(last) : null };
    },
  } = steps;
  return async (params) => {
    check(params);
    const isAfter = params.cursor === undefined ? () => true : after(params.cursor);
    const listed = [...records.values()].filter((r) => keep(params, r) && isAfter(r)).sort(byRef);
    const { page: shown, next } = page(listed, params.limit);
    return { records: shown.map((record) => show(record, params)), cursor: next };
  };
}

/** The reference store's stats with its tally replaced. */
function statsWith(
  records: Map<string, IdempotencyRecord>,
  tally: (
    params: Parameters<NonNullable<IdempotencyStore['stats']>>[0],
    record: IdempotencyRecord,
    counts: Counts,
  ) => void,
): NonNullable<IdempotencyStore['stats']> {
  return async (params) => {
    const counts: Counts = {
      inFlight: 0,
      leaseLapsed: 0,
      completed: 0,
      expired: 0,
      oldestInFlightCreatedAtMs: null,
    };
    for (const record of records.values()) tally(params, record, counts);
    return counts;
  };
}
type Counts = {
  -readonly [K in keyof ReturnType<StatsTally['result']>]: ReturnType<StatsTally['result']>[K];
};

/** A correct count of one record, for broken tallies to start from. */
function countRecord(
  params: { nowMs: number; scope?: string },
  record: IdempotencyRecord,
  counts: Counts,
  state = recordStateAt(record, params.nowMs),
  lapsed = record.leaseUntilMs <= params.nowMs,
): void {
  if (params.scope !== undefined && record.scope !== params.scope) return;
  if (state === 'expired') counts.expired++;
  else if (state === 'completed') counts.completed++;
  else {
    counts.inFlight++;
    if (lapsed) counts.leaseLapsed++;
    const oldest = counts.oldestInFlightCreatedAtMs;
    if (oldest === null || record.createdAtMs < oldest) counts.oldestInFlightCreatedAtMs = record.createdAtMs;
  }
}

// Broken inspection methods (forget, list, stats), each with the test of its group that must catch it.
const brokenInspection: [string, GroupName, RegExp, () => IdempotencyStore][] = [
  [
    'a forget that ignores the scope (deletes the key everywhere)',
    'forget',
    /forget MUST delete only its \(scope, key\)/,
    () =>
      createReferenceStore((records) => ({
        async forget({ key }) {
          let deleted = false;
          for (const [recordId, record] of records)
            if (record.key === key) deleted = records.delete(recordId) || deleted;
          return deleted;
        },
      })),
  ],
  [
    'a forget that matches keys as a LIKE pattern',
    'forget',
    /forget MUST delete only its \(scope, key\)/,
    () =>
      createReferenceStore((records) => ({
        async forget({ scope, key }) {
          const pattern = new RegExp(
            `^${key
              .replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
              .replaceAll('%', '.*')
              .replaceAll('_', '.')}$`,
          );
          let deleted = false;
          for (const [recordId, record] of records)
            if (record.scope === scope && pattern.test(record.key))
              deleted = records.delete(recordId) || deleted;
          return deleted;
        },
      })),
  ],
  [
    'a forget that spares in-flight records (release in reverse)',
    'forget',
    /forget MUST delete an in-flight record/,
    () =>
      createReferenceStore((records) => ({
        async forget({ scope, key }) {
          return records.get(id(scope, key))?.response != null && records.delete(id(scope, key));
        },
      })),
  ],
  [
    'a forget that answers true whether or not it deleted anything',
    'forget',
    /forget of a record that does not exist MUST return false/,
    () =>
      createReferenceStore((records) => ({
        async forget({ scope, key }) {
          records.delete(id(scope, key));
          return true;
        },
      })),
  ],
  [
    'a forget that only expires the record (load still finds it)',
    'forget',
    /forget MUST delete a completed record/,
    () =>
      createReferenceStore((records) => ({
        async forget({ scope, key }) {
          const record = records.get(id(scope, key));
          if (record === undefined) return false;
          records.set(id(scope, key), { ...record, expiresAtMs: 0 });
          return true;
        },
      })),
  ],
  [
    'a list whose cursor skips the first record of the next page',
    'list',
    /page through the 25 records/,
    () =>
      createReferenceStore((records) => ({
        list: listWith(records, {
          page: (listed, limit) => {
            const taken = listed.slice(0, limit);
            const skipped = listed[limit];
            return { page: taken, next: skipped === undefined ? null : encodeRecordCursor(skipped) };
          },
        }),
      })),
  ],
  [
    'a list whose pages hold one record more than the limit',
    'list',
    /limit 1 MUST page one record at a time/,
    () =>
      createReferenceStore((records) => ({
        list: listWith(records, {
          page: (listed, limit) => {
            const taken = listed.slice(0, limit + 1);
            const last = taken.at(-1);
            return { page: taken, next: listed.length > limit + 1 && last ? encodeRecordCursor(last) : null };
          },
        }),
      })),
  ],
  [
    'a list that never ends (its last page still has a cursor)',
    'list',
    /page through the 25 records/,
    () =>
      createReferenceStore((records) => ({
        list: listWith(records, {
          page: (listed, limit) => {
            const taken = listed.slice(0, limit);
            return { page: taken, next: encodeRecordCursor(taken.at(-1) ?? { scope: '\uffff', key: '' }) };
          },
        }),
      })),
  ],
  [
    'a list with an offset for a cursor (records removed between pages are skipped over)',
    'list',
    /records added, completed and removed between pages/,
    () =>
      createReferenceStore((records) => ({
        async list(params) {
          checkListParams(params);
          const offset =
            params.cursor === undefined ? 0 : Number(Buffer.from(params.cursor, 'base64url').toString());
          if (!Number.isSafeInteger(offset)) throw new RangeError('malformed cursor');
          const listed = [...records.values()].filter((r) => listedBy(params, r)).sort(byRef);
          const end = offset + params.limit;
          return {
            records: listed.slice(offset, end).map((r) => listedRecord(r, params.bodies === true)),
            cursor: end < listed.length ? Buffer.from(String(end)).toString('base64url') : null,
          };
        },
      })),
  ],
  [
    'a list that leaks bodies when none were asked for',
    'list',
    /MUST NOT include bodies unless asked for/,
    () =>
      createReferenceStore((records) => ({
        list: listWith(records, { show: (r) => listedRecord(r, true) }),
      })),
  ],
  [
    'a list that never gives bodies',
    'list',
    /with bodies MUST give each stored body/,
    () =>
      createReferenceStore((records) => ({
        list: listWith(records, { show: (r) => listedRecord(r, false) }),
      })),
  ],
  [
    'a list that shows a missing body as 0 bytes',
    'list',
    /bodyBytes \(null for none/,
    () =>
      createReferenceStore((records) => ({
        list: listWith(records, {
          show: (r, p) => {
            const listed = listedRecord(r, p.bodies === true);
            return listed.response === null
              ? listed
              : { ...listed, response: { ...listed.response, bodyBytes: listed.response.bodyBytes ?? 0 } };
          },
        }),
      })),
  ],
  [
    'a list that drops headers',
    'list',
    /page through the 25 records/,
    () =>
      createReferenceStore((records) => ({
        list: listWith(records, {
          show: (r, p) => {
            const listed = listedRecord(r, p.bodies === true);
            return listed.response === null
              ? listed
              : { ...listed, response: { ...listed.response, headers: {} } };
          },
        }),
      })),
  ],
  [
    "a list that keeps a record from its expiresAtMs's millisecond (expired only after it)",
    'list',
    /judge each record’s state at nowMs/,
    () =>
      createReferenceStore((records) => ({
        list: listWith(records, {
          keep: (p, r) =>
            listedBy({ ...p, nowMs: p.nowMs - 1 }, r) && (p.scope === undefined || r.scope === p.scope),
        }),
      })),
  ],
  [
    'a list that calls an expired in-flight record in flight',
    'list',
    /judge each record’s state at nowMs/,
    () =>
      createReferenceStore((records) => ({
        list: listWith(records, {
          keep: (p, r) =>
            (p.scope === undefined || r.scope === p.scope) &&
            (p.state === undefined ||
              p.state === (r.response === null ? 'in-flight' : recordStateAt(r, p.nowMs))),
        }),
      })),
  ],
  [
    'a list whose scope filter is a prefix match',
    'list',
    /list that scope only/,
    () =>
      createReferenceStore((records) => ({
        list: listWith(records, {
          keep: ({ scope, ...p }, r) => listedBy(p, r) && r.scope.startsWith(scope ?? ''),
        }),
      })),
  ],
  [
    'a list that starts over on a cursor it cannot read',
    'list',
    /refuse a malformed cursor/,
    () =>
      createReferenceStore((records) => ({
        list: listWith(records, {
          after: (cursor) => {
            try {
              const ref = decodeRecordCursor(cursor);
              return (record) => byRef(record, ref) > 0;
            } catch {
              return () => true;
            }
          },
        }),
      })),
  ],
  [
    'a list that takes any limit',
    'list',
    /refuse a limit that is not an integer/,
    () => createReferenceStore((records) => ({ list: listWith(records, { check: () => {} }) })),
  ],
  [
    'a stats that counts a lease as lapsed only after leaseUntilMs',
    'stats',
    /leaseLapsed MUST count in-flight records from leaseUntilMs <= nowMs on/,
    () =>
      createReferenceStore((records) => ({
        stats: statsWith(records, (p, r, c) => countRecord(p, r, c, undefined, r.leaseUntilMs < p.nowMs)),
      })),
  ],
  [
    'a stats that counts an expired in-flight record as in flight',
    'stats',
    /an expired record as expired only/,
    () =>
      createReferenceStore((records) => ({
        stats: statsWith(records, (p, r, c) =>
          countRecord(p, r, c, r.response === null ? 'in-flight' : recordStateAt(r, p.nowMs)),
        ),
      })),
  ],
  [
    'a stats that takes the oldest of every record, not of the in-flight ones',
    'stats',
    /count a scope’s records by state at nowMs/,
    () =>
      createReferenceStore((records) => ({
        stats: statsWith(records, (p, r, c) => {
          countRecord(p, r, c);
          if (p.scope !== undefined && r.scope !== p.scope) return;
          const oldest = c.oldestInFlightCreatedAtMs;
          if (oldest === null || r.createdAtMs < oldest) c.oldestInFlightCreatedAtMs = r.createdAtMs;
        }),
      })),
  ],
  [
    'a stats whose scope filter is a prefix match',
    'stats',
    /count that scope only/,
    () =>
      createReferenceStore((records) => ({
        stats: statsWith(records, (p, r, c) =>
          r.scope.startsWith(p.scope ?? '') ? countRecord({ nowMs: p.nowMs }, r, c) : undefined,
        ),
      })),
  ],
  [
    'a stats that judges states by the wall clock, not nowMs',
    'stats',
    /judge states at the nowMs it is given/,
    () =>
      createReferenceStore((records) => ({
        stats: statsWith(records, (p, r, c) => countRecord({ ...p, nowMs: Date.now() }, r, c)),
      })),
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
        reserve: async (p) => store.reserve({ ...p, nowMs: p.nowMs - 1 }),
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

/** The reference store without `method`. */
const without = (method: InspectionMethod) => () => {
  const { [method]: _dropped, ...rest } = createReferenceStore();
  return rest;
};

describe('a store without an optional method', () => {
  test.each(ALL_INSPECTION)(
    'the %s group registers one passing test that says the store lacks it, and says so once on the console',
    async (method) => {
      const info = vi.spyOn(console, 'info').mockImplementation(() => {});
      try {
        const runs = [
          await failuresOf(conformanceGroups[method], without(method), { inspection: [] }),
          await failuresOf(conformanceGroups[method], without(method), { inspection: [] }),
        ];
        for (const { failed, names } of runs) {
          expect(failed).toEqual([]);
          expect(names).toEqual([`${method}: not implemented by this store (optional), skipped`]);
        }
        const told = info.mock.calls.filter(([message]) =>
          String(message).includes(`${method} is not implemented`),
        );
        expect(told.length).toBeLessThanOrEqual(1);
      } finally {
        info.mockRestore();
      }
    },
  );

  test.each(ALL_INSPECTION)(
    'a store that has %s but did not declare it fails that one test (never goes untested)',
    async (method) => {
      const { failed, names } = await failuresOf(conformanceGroups[method], () => createReferenceStore(), {
        inspection: [],
      });
      expect(names.length).toBe(1);
      expect(failed).toEqual(names);
    },
  );

  test.each(ALL_INSPECTION)(
    'a store that declares %s but lacks it fails every test of the group',
    async (method) => {
      const { failed, names } = await failuresOf(conformanceGroups[method], without(method));
      expect(names.length).toBeGreaterThan(3);
      expect(failed).toEqual(names);
    },
  );

  test('an unknown name in inspection is refused when the tests are registered', () => {
    const harness: TestHarness = { describe: (_name, body) => body(), test: () => {} };
    expect(() =>
      conformanceGroups.list(harness, () => ({ store: createReferenceStore() }), {
        inspection: ['lists' as InspectionMethod],
      }),
    ).toThrow(TypeError);
  });
});

describe('the kit fails broken stores, in the matching group', () => {
  test.each([...brokenStores, ...brokenInspection])(
    '%s fails the %s group',
    async (_, groupName, expectedFailure, makeStore) => {
      const { failed } = await failuresOf(conformanceGroups[groupName], makeStore);
      expect(
        failed.some((name) => expectedFailure.test(name)),
        `failed: ${failed.join('; ') || 'none'}`,
      ).toBe(true);
    },
  );

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
