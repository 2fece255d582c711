import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import {
  type IdempotencyRecord,
  type IdempotencyStore,
  type ListedRecord,
  type ListParams,
  MAX_LIST_LIMIT,
  type StoredResponse,
} from '@idem/core';
import {
  BASE_MS,
  type ConformanceGroup,
  freshRef,
  jsonResponse,
  reserveAt,
  resolveOptions,
  withStore,
} from '../harness.js';
import { methodOf, optionalMethodGroup } from './optional-method.js';
import { AT_MS, idOf, keysOf, type SeedState, seed } from './seed-records.js';

type List = NonNullable<IdempotencyStore['list']>;

/** Pages of a listing the kit follows to the end before it gives up: no correct store needs more here. */
const MAX_PAGES = 1_000;

/**
 * Follow `list` from the first page to the last (a null cursor), checking that no page holds more than `limit`
 * records; every record of every page, in order.
 */
async function listAll(list: List, params: Omit<ListParams, 'cursor'>): Promise<ListedRecord[]> {
  const listed: ListedRecord[] = [];
  let cursor: string | undefined;
  for (let page = 1; page <= MAX_PAGES; page++) {
    const result = await list(cursor === undefined ? params : { ...params, cursor });
    assert.ok(Array.isArray(result.records), 'a page MUST hold an array of records');
    assert.ok(
      result.records.length <= params.limit,
      `page ${page} holds ${result.records.length} records, more than its limit of ${params.limit}`,
    );
    listed.push(...result.records);
    if (result.cursor === null) return listed;
    assert.equal(typeof result.cursor, 'string', 'a cursor MUST be a string or null');
    cursor = result.cursor;
  }
  assert.fail(`list did not come to a null cursor within ${MAX_PAGES} pages`);
}

const sameBytes = (a: Uint8Array, b: Uint8Array): boolean =>
  Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(Buffer.from(b.buffer, b.byteOffset, b.byteLength));

/**
 * A listed record MUST be the stored record with its response shown as `list` shows it: status, headers,
 * `bodyBytes` (null without a body), `bodyOmitted` when set, and the body only when asked for.
 */
function assertListed(listed: ListedRecord, stored: IdempotencyRecord, bodies: boolean): void {
  const where = idOf(stored);
  const { response, ...fields } = listed;
  const { response: storedResponse, ...storedFields } = stored;
  assert.deepEqual(fields, storedFields, `${where}: a listed record MUST carry the stored fields`);
  if (storedResponse === null) {
    assert.equal(response, null, `${where}: an in-flight record is listed without a response`);
    return;
  }
  assert.ok(response !== null && typeof response === 'object', `${where}: a completed record has a response`);
  const { body, ...shown } = response;
  const { body: storedBody, bodyOmitted } = storedResponse;
  assert.deepEqual(
    shown,
    {
      status: storedResponse.status,
      headers: storedResponse.headers,
      bodyBytes: storedBody === null ? null : storedBody.byteLength,
      ...(bodyOmitted === true ? { bodyOmitted } : {}),
    },
    `${where}: status, headers, bodyBytes (null without a body) and bodyOmitted`,
  );
  if (!bodies) {
    assert.equal('body' in response, false, `${where}: a body MUST NOT be listed unless asked for`);
    return;
  }
  assert.ok('body' in response, `${where}: with bodies, every response MUST carry its body`);
  if (storedBody === null) {
    assert.equal(body, null, `${where}: no body is listed as null`);
    return;
  }
  assert.ok(body instanceof Uint8Array, `${where}: a listed body MUST be a Uint8Array`);
  assert.ok(sameBytes(body, storedBody), `${where}: a listed body MUST be the stored bytes exactly`);
}

/**
 * Check a listing against what it must and may hold: every record of `must`, nothing but records of `must`
 * and `may`, each listed as it is stored.
 */
function assertListing(
  listed: readonly ListedRecord[],
  must: readonly IdempotencyRecord[],
  may: readonly IdempotencyRecord[] = [],
  bodies = false,
): void {
  const byId = new Map([...must, ...may].map((record) => [idOf(record), record]));
  const seen = new Set<string>();
  for (const record of listed) {
    const stored = byId.get(idOf(record));
    assert.ok(stored !== undefined, `${idOf(record)} MUST NOT be listed here`);
    assertListed(record, stored, bodies);
    seen.add(idOf(record));
  }
  const missing = must.filter((record) => !seen.has(idOf(record)));
  assert.deepEqual(missing.map(idOf), [], 'every record present MUST be listed');
}

const bytes = (text: string): Uint8Array => new TextEncoder().encode(text);

/** Responses whose listing has something to get wrong. */
const RESPONSES: readonly (readonly [name: string, response: StoredResponse])[] = [
  [
    'a binary body',
    {
      status: 200,
      headers: { 'content-type': 'application/octet-stream' },
      body: Uint8Array.from({ length: 512 }, (_, i) => i % 256),
    },
  ],
  ['an empty body', { status: 204, headers: {}, body: new Uint8Array(0) }],
  ['no body', { status: 202, headers: { location: '/jobs/1' }, body: null }],
  [
    'an omitted body',
    { status: 200, headers: { 'content-type': 'text/plain' }, body: null, bodyOmitted: true },
  ],
  ['a 64 KiB body', { status: 201, headers: {}, body: new Uint8Array(randomBytes(64 * 1024)) }],
  [
    'non-ASCII headers and body',
    {
      status: 201,
      headers: { 'content-type': 'application/json; charset=utf-8', location: '/v1/caf\u00e9/\u6771\u4eac' },
      body: bytes('{"name":"caf\u00e9 \u{1F680}"}'),
    },
  ],
];

/**
 * `list` (optional) pages through records in a stable order with an opaque cursor: every record present from
 * the first page to the last at least once, never more than `limit` per page, filtered by scope and by state at
 * `nowMs`, bodies only when asked; arguments it cannot answer are refused.
 */
export const listGroup: ConformanceGroup = (harness, makeStore, options) => {
  const { describe, test } = harness;
  const { nativeExpiry } = resolveOptions(options);
  /** Records that MUST be listed, unless the backend expires records itself: then they may be gone already. */
  const vanishing = (records: readonly IdempotencyRecord[]) =>
    nativeExpiry === undefined ? { must: records, may: [] } : { must: [], may: records };

  optionalMethodGroup(harness, makeStore, options, 'list', () =>
    describe('list', () => {
      test('list of a scope with no records MUST return no records and a null cursor', () =>
        withStore(makeStore, async ({ store }) => {
          const list = methodOf(store, 'list');
          const page = await list({ scope: freshRef().scope, limit: 10, nowMs: AT_MS });
          assert.deepEqual(page, { records: [], cursor: null });
        }));

      test('list MUST page through the 25 records of a scope 7 at a time, each at least once, each as stored', () =>
        withStore(makeStore, async ({ store }) => {
          const list = methodOf(store, 'list');
          const { scope } = freshRef();
          // Live records only: a backend that expires records itself may drop the others at any time.
          const states: SeedState[] = ['in-flight', 'completed', 'lapsed', 'completed'];
          const records: IdempotencyRecord[] = [];
          for (const [i, key] of keysOf(25).entries()) {
            const state = states[i % states.length] as SeedState;
            records.push(await seed(store, { scope, key }, state, { createdAtMs: BASE_MS + i }));
          }
          // Records of scopes next to this one, which a prefix match would list too.
          for (const other of [`${scope}0`, `${scope}-`, scope.slice(0, -1)]) {
            await seed(store, { scope: other, key: 'k-0-0' }, 'completed');
          }
          const listed = await listAll(list, { scope, limit: 7, nowMs: AT_MS });
          assertListing(listed, records);
          for (const record of records) {
            assert.deepEqual(
              await store.load({ scope: record.scope, key: record.key }),
              record,
              `${idOf(record)}: listing MUST change nothing`,
            );
          }
        }));

      test('list with limit 1 MUST page one record at a time to the end', () =>
        withStore(makeStore, async ({ store }) => {
          const list = methodOf(store, 'list');
          const { scope } = freshRef();
          const records = [];
          for (const key of keysOf(5)) records.push(await seed(store, { scope, key }, 'completed'));
          assertListing(await listAll(list, { scope, limit: 1, nowMs: AT_MS }), records);
        }));

      test('list without a scope MUST list the records of every scope, and filter them by state', () =>
        withStore(makeStore, async ({ store }) => {
          const list = methodOf(store, 'list');
          const mine = [freshRef().scope, freshRef().scope, ''];
          const completed: IdempotencyRecord[] = [];
          const inFlight: IdempotencyRecord[] = [];
          for (const scope of mine) {
            for (const key of keysOf(3))
              completed.push(await seed(store, { scope, key: `${key}-${randomUUID()}` }, 'completed'));
            inFlight.push(await seed(store, { scope, key: randomUUID() }, 'in-flight'));
          }
          // The backend may hold other tests' records too: only this test's scopes are checked.
          const ours = (listed: readonly ListedRecord[]) => {
            const keys = new Set([...completed, ...inFlight].map(idOf));
            return listed.filter((record) => keys.has(idOf(record)));
          };
          assertListing(ours(await listAll(list, { limit: MAX_LIST_LIMIT, nowMs: AT_MS })), [
            ...completed,
            ...inFlight,
          ]);
          assertListing(
            ours(await listAll(list, { limit: MAX_LIST_LIMIT, nowMs: AT_MS, state: 'completed' })),
            completed,
          );
          assertListing(
            ours(await listAll(list, { limit: MAX_LIST_LIMIT, nowMs: AT_MS, state: 'in-flight' })),
            inFlight,
          );
          for (const record of await listAll(list, {
            limit: MAX_LIST_LIMIT,
            nowMs: AT_MS,
            state: 'completed',
          })) {
            assert.ok(
              record.response !== null,
              `${idOf(record)}: only completed records with state 'completed'`,
            );
          }
        }));

      test('list with a scope MUST list that scope only, whatever LIKE wildcards, case, spaces or quotes set it apart', () =>
        withStore(makeStore, async ({ store }) => {
          const list = methodOf(store, 'list');
          const { scope: base } = freshRef();
          const scopes = [
            base,
            `${base}%`,
            `${base}_`,
            `${base}_x`,
            `${base}x`,
            `${base} `,
            `${base}\\`,
            `${base}\\%`,
            `${base}'"`,
            `${base}\u00e9`,
            `${base}e\u0301`,
            `${base}\u{1F600}`,
            `${base}\uffff`,
            base.toUpperCase(),
          ];
          const keys = ['k', 'k ', 'K', 'k%', 'k_', "k'", 'k\\', 'k\u{1F600}'];
          const byScope = new Map<string, IdempotencyRecord[]>();
          for (const scope of scopes) {
            const records = [];
            for (const [i, key] of keys.entries()) {
              records.push(await seed(store, { scope, key }, i % 3 === 0 ? 'in-flight' : 'completed'));
            }
            byScope.set(scope, records);
          }
          for (const scope of scopes) {
            const listed = await listAll(list, { scope, limit: 3, nowMs: AT_MS });
            for (const record of listed) {
              assert.equal(
                record.scope,
                scope,
                `listing ${JSON.stringify(scope)} MUST NOT list ${idOf(record)}`,
              );
            }
            assertListing(listed, byScope.get(scope) ?? []);
          }
        }));

      test('list MUST judge each record’s state at nowMs: expired from expiresAtMs on, in flight or completed', () =>
        withStore(makeStore, async ({ store }) => {
          const list = methodOf(store, 'list');
          const { scope } = freshRef();
          const seeds: SeedState[] = [
            'in-flight',
            'in-flight',
            'lapsed',
            'completed',
            'completed',
            'expired-completed',
            'expired-in-flight',
          ];
          const records = new Map<SeedState, IdempotencyRecord[]>();
          for (const [i, state] of seeds.entries()) {
            const record = await seed(store, { scope, key: `k${i}` }, state, { createdAtMs: BASE_MS + i });
            records.set(state, [...(records.get(state) ?? []), record]);
          }
          const of = (...states: SeedState[]) => states.flatMap((state) => records.get(state) ?? []);
          const at = (nowMs: number, state?: 'in-flight' | 'completed' | 'expired') =>
            listAll(list, { scope, limit: 2, nowMs, ...(state === undefined ? {} : { state }) });

          // At AT_MS: a lapsed lease is still in flight; both expired records are expired, whatever they hold.
          assertListing(await at(AT_MS, 'in-flight'), of('in-flight', 'lapsed'));
          assertListing(await at(AT_MS, 'completed'), of('completed'));
          const expired = vanishing(of('expired-completed', 'expired-in-flight'));
          assertListing(await at(AT_MS, 'expired'), expired.must, expired.may);
          assertListing(
            await at(AT_MS),
            [...of('in-flight', 'lapsed', 'completed'), ...expired.must],
            expired.may,
          );

          // Two milliseconds before, nothing has expired yet: each record is what it holds.
          const before = AT_MS - 2;
          assertListing(await at(before, 'expired'), []);
          const inFlightThen = vanishing(of('expired-in-flight'));
          assertListing(
            await at(before, 'in-flight'),
            [...of('in-flight', 'lapsed'), ...inFlightThen.must],
            inFlightThen.may,
          );
          const completedThen = vanishing(of('expired-completed'));
          assertListing(
            await at(before, 'completed'),
            [...of('completed'), ...completedThen.must],
            completedThen.may,
          );
        }));

      test('list MUST NOT include bodies unless asked for, and MUST give bodyBytes (null for none and for an omitted one)', () =>
        withStore(makeStore, async ({ store }) => {
          const list = methodOf(store, 'list');
          const { scope } = freshRef();
          const records = [await seed(store, { scope, key: 'in-flight' }, 'in-flight')];
          for (const [i, [, response]] of RESPONSES.entries()) {
            records.push(await seed(store, { scope, key: `r${i}` }, 'completed', { response }));
          }
          assertListing(await listAll(list, { scope, limit: 3, nowMs: AT_MS }), records, [], false);
          assertListing(
            await listAll(list, { scope, limit: 3, nowMs: AT_MS, bodies: false }),
            records,
            [],
            false,
          );
        }));

      test('list with bodies MUST give each stored body byte for byte', () =>
        withStore(makeStore, async ({ store }) => {
          const list = methodOf(store, 'list');
          const { scope } = freshRef();
          const records = [await seed(store, { scope, key: 'in-flight' }, 'in-flight')];
          for (const [i, [, response]] of RESPONSES.entries()) {
            records.push(await seed(store, { scope, key: `r${i}` }, 'completed', { response }));
          }
          assertListing(
            await listAll(list, { scope, limit: 4, nowMs: AT_MS, bodies: true }),
            records,
            [],
            true,
          );
        }));

      test(`list MUST refuse a limit that is not an integer from 1 to ${MAX_LIST_LIMIT}, and an unknown state, with a RangeError`, () =>
        withStore(makeStore, async ({ store }) => {
          const list = methodOf(store, 'list');
          const { scope } = freshRef();
          for (const limit of [0, -1, MAX_LIST_LIMIT + 1, 1.5, Number.NaN, Number.POSITIVE_INFINITY]) {
            await assert.rejects(
              async () => list({ scope, limit, nowMs: AT_MS }),
              RangeError,
              `limit ${limit} MUST be refused with a RangeError`,
            );
          }
          await assert.rejects(
            async () => list({ scope, limit: 5, nowMs: AT_MS, state: 'done' as unknown as 'completed' }),
            RangeError,
            'an unknown state MUST be refused',
          );
          await assert.rejects(
            async () => list({ scope, limit: 5, nowMs: 1.5 }),
            RangeError,
            'nowMs MUST be an integer',
          );
          assert.deepEqual(await list({ scope, limit: MAX_LIST_LIMIT, nowMs: AT_MS }), {
            records: [],
            cursor: null,
          });
          assert.deepEqual(await list({ scope, limit: 1, nowMs: AT_MS }), { records: [], cursor: null });
        }));

      test('list MUST refuse a malformed cursor, or one of another kind of store, with a RangeError', () =>
        withStore(makeStore, async ({ store }) => {
          const list = methodOf(store, 'list');
          const { scope } = freshRef();
          await seed(store, { scope, key: 'a' }, 'completed');
          const base64url = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
          for (const cursor of [
            '',
            'not a cursor',
            '!!!',
            '["k1","a","b"]',
            base64url(['x9', scope, 'a']),
            base64url({ scope, key: 'a' }),
            base64url(['k1', scope]),
            base64url(['k1', 1, 2]),
          ]) {
            await assert.rejects(
              async () => list({ scope, limit: 5, nowMs: AT_MS, cursor }),
              RangeError,
              `cursor ${JSON.stringify(cursor)} MUST be refused with a RangeError`,
            );
          }
        }));

      test('records added, completed and removed between pages MUST NOT break paging: every record present throughout is listed', () =>
        withStore(makeStore, async ({ store }) => {
          const list = methodOf(store, 'list');
          const { scope } = freshRef();
          const owners = new Map<string, string>();
          const reserve = async (key: string) => {
            const params = reserveAt({ scope, key }, BASE_MS);
            await store.reserve(params);
            owners.set(key, params.owner);
          };
          for (const key of keysOf(20)) await reserve(key);
          const first = await list({ scope, limit: 5, nowMs: AT_MS });
          assert.ok(first.records.length <= 5);
          assert.ok(first.cursor !== null, 'twenty records do not fit a page of five');
          const listedFirst = new Set(first.records.map((record) => record.key));
          const notYet = [...owners.keys()].filter((key) => !listedFirst.has(key));
          const remove = async (key: string) => {
            assert.equal(await store.release({ scope, key, owner: owners.get(key) as string }), true);
            owners.delete(key);
          };
          // Away go the record the cursor stands after, two more listed ones, and three not listed yet.
          const listedKeys = first.records.map((record) => record.key);
          for (const key of new Set([listedKeys.at(-1), listedKeys[0], listedKeys[1]])) {
            if (key !== undefined) await remove(key);
          }
          for (const key of notYet.slice(-3)) await remove(key);
          // One not listed yet is completed; four new keys arrive.
          const completing = notYet[3] as string;
          const response = jsonResponse(200, { completing });
          assert.equal(
            await store.finalize({
              scope,
              key: completing,
              owner: owners.get(completing) as string,
              response,
              nowMs: BASE_MS + 1,
            }),
            true,
          );
          const added = [`~${randomUUID()}`, `${notYet[4]}-after`, '0', '\u{10FFFF}'];
          for (const key of added) await reserve(key);
          // Go on from the first page's cursor, to the end.
          const continued: ListedRecord[] = [];
          let cursor: string | null = first.cursor;
          for (let page = 0; cursor !== null; page++) {
            assert.ok(page < MAX_PAGES, 'paging MUST come to an end');
            const next = await list({ scope, limit: 5, nowMs: AT_MS, cursor });
            assert.ok(next.records.length <= 5);
            continued.push(...next.records);
            cursor = next.cursor;
          }
          const everSeen = new Set([...first.records, ...continued].map((record) => record.key));
          const throughout = [...owners.keys()].filter((key) => !added.includes(key));
          for (const key of throughout)
            assert.ok(everSeen.has(key), `${key} was present throughout and MUST be listed`);
          const known = new Set([...keysOf(20), ...added]);
          for (const record of continued) {
            assert.ok(known.has(record.key), `${record.key} was never written`);
            assert.equal(record.scope, scope);
          }
          // And a listing from the start now holds exactly what is stored now.
          const fresh = await listAll(list, { scope, limit: 5, nowMs: AT_MS });
          assertListing(fresh, await loaded(store, scope, [...owners.keys()]));
        }));
    }),
  );
};

/** The stored records of `keys` in `scope`. */
async function loaded(
  store: IdempotencyStore,
  scope: string,
  keys: readonly string[],
): Promise<IdempotencyRecord[]> {
  const records = [];
  for (const key of keys) {
    const record = await store.load({ scope, key });
    assert.ok(record !== undefined, `${key} is stored`);
    records.push(record);
  }
  return records;
}
