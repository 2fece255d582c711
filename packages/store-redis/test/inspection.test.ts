import { encodeRecordCursor, isStoreLimitError, MAX_LIST_LIMIT } from '@idem/core';
import { createRedisStore, type RedisStoreOptions } from '@idem/store-redis';
import { describe, expect, test } from 'vitest';
import { parseRecordTag } from '../src/key-layout.js';
import {
  type ClientVariant,
  ioredisClusterVariant,
  ioredisVariant,
  nodeRedisClusterVariant,
  nodeRedisVariant,
} from './support/client-options.js';
import {
  cursorOf,
  cursorParts,
  expectExactlyOnce,
  type InspectableStore,
  idOf,
  inspectable,
  keysPerNode,
  listAll,
  seed,
  sweepLiteral,
} from './support/inspection.js';
import { NOW_MS, reserveParams, response } from './support/params.js';
import { clusterUp, isClusterKind, redisUp, uniquePrefix } from './support/servers.js';

const standalone = await redisUp();
const cluster = await clusterUp();

/** A keyPrefix with every glob character SCAN's MATCH knows, and the separator. */
const GLOB_KEY_PREFIX = 'g*[?]\\:';

const variants: ClientVariant[] = [
  ...(standalone
    ? [
        ioredisVariant('default (RESP3)'),
        ioredisVariant('protocol 2', { protocol: 2 }),
        ioredisVariant('enableAutoPipelining', { enableAutoPipelining: true }),
        ioredisVariant("keyPrefix 'app:'", { keyPrefix: 'app:' }),
        ioredisVariant(`keyPrefix '${GLOB_KEY_PREFIX}' and enableAutoPipelining`, {
          keyPrefix: GLOB_KEY_PREFIX,
          enableAutoPipelining: true,
        }),
        ioredisVariant('stringNumbers', { stringNumbers: true }),
        nodeRedisVariant('RESP2', { RESP: 2 }),
        nodeRedisVariant('RESP3', { RESP: 3 }),
        nodeRedisVariant(`keyPrefix '${GLOB_KEY_PREFIX}'`, { keyPrefix: GLOB_KEY_PREFIX }),
      ]
    : []),
  ...(cluster
    ? [
        ioredisClusterVariant('default'),
        ioredisClusterVariant('enableAutoPipelining', { enableAutoPipelining: true }),
        ioredisClusterVariant(`keyPrefix '${GLOB_KEY_PREFIX}'`, { keyPrefix: GLOB_KEY_PREFIX }),
        nodeRedisClusterVariant('RESP2', 2),
        nodeRedisClusterVariant('RESP3', 3),
        nodeRedisClusterVariant(`keyPrefix '${GLOB_KEY_PREFIX}'`, 3, { keyPrefix: GLOB_KEY_PREFIX }),
      ]
    : []),
];

interface Subject {
  readonly store: InspectableStore;
  readonly prefix: string;
  /** Another store on the same client, under `prefix` + `suffix`. */
  storeAt(suffix: string): InspectableStore;
  readonly close: () => Promise<void>;
}

/** A store under a fresh prefix on a client of `variant`; its keys are swept afterwards, pass or fail. */
async function withVariant(
  variant: ClientVariant,
  body: (subject: Subject) => Promise<void>,
  options: RedisStoreOptions = {},
): Promise<void> {
  const opened = await variant.open();
  const prefix = uniquePrefix();
  const storeAt = (suffix: string) =>
    inspectable(createRedisStore(opened.client, { ...options, prefix: `${prefix}${suffix}` }));
  try {
    await body({ store: storeAt(''), prefix, storeAt, close: opened.close });
  } finally {
    await opened.close().catch(() => {});
    await sweepLiteral(variant.kind, `${variant.keyPrefix}${prefix}`);
  }
}

const HOSTILE_SCOPES = [
  '*',
  '?',
  '[',
  ']',
  '[a-z]',
  '\\',
  '%',
  '%2A',
  '%u0041',
  ':',
  '{',
  '}',
  '{x}',
  'a:b',
  'ünïcødé',
  '😀',
  '\ud800',
  '',
  'a*',
];

describe.each(variants.map((variant) => [variant.name, variant] as const))('%s', (_, variant) => {
  test('pages of 1, 3 and 1000 list every record of a static set exactly once, every page full but the last, the last cursor null', async () => {
    await withVariant(variant, async ({ store, prefix }) => {
      const made = [
        ...(await seed(store, 'alpha', 12)),
        ...(await seed(store, 'beta', 8)),
        ...(await seed(store, 'gamma', 5)),
      ];
      if (isClusterKind(variant.kind)) {
        // Several masters to walk: 25 records spread over the three.
        const perNode = await keysPerNode(variant.kind, `${variant.keyPrefix}${prefix}`);
        expect(perNode.filter((count) => count > 0).length).toBe(3);
      }
      for (const limit of [1, 3, MAX_LIST_LIMIT]) {
        const { records, pages } = await listAll(store, { limit });
        expectExactlyOnce(records, made);
        expect(pages).toBe(Math.ceil(made.length / limit));
      }
    });
  });

  test('a scope filter lists that scope only, for scopes made of glob characters, %, :, braces, unicode and a lone surrogate', async () => {
    await withVariant(variant, async ({ store }) => {
      const byScope = new Map<string, Awaited<ReturnType<typeof seed>>>();
      for (const scope of [...HOSTILE_SCOPES, 'a', 'ab', 'x'])
        byScope.set(scope, await seed(store, scope, 2));
      for (const [scope, made] of byScope) {
        const { records } = await listAll(store, { scope, limit: 1 });
        expectExactlyOnce(records, made);
        expect(await store.stats({ scope, nowMs: NOW_MS })).toEqual({
          inFlight: 1,
          leaseLapsed: 0,
          completed: 1,
          expired: 0,
          oldestInFlightCreatedAtMs: NOW_MS,
        });
      }
      expect((await listAll(store, { scope: 'none', limit: 10 })).records).toEqual([]);
    });
  });

  test('records are listed as load reads them, bodies only with bodies: true, and state is judged at nowMs', async () => {
    await withVariant(variant, async ({ store }) => {
      const big = new Uint8Array(300_000).map((_, i) => i % 251);
      const inFlight = reserveParams('s', 'in-flight');
      const shortLived = { ...reserveParams('s', 'short-lived'), expiresAtMs: NOW_MS + 1_000 };
      const answers = {
        small: response('hello'),
        empty: { status: 204, headers: {}, body: null },
        omitted: { status: 200, headers: { etag: '"x"' }, body: null, bodyOmitted: true as const },
        big: { status: 200, headers: {}, body: big },
      };
      const completed = Object.keys(answers).map((key) => reserveParams('s', key));
      for (const params of [inFlight, shortLived, ...completed]) await store.reserve(params);
      for (const params of completed) {
        const answer = answers[params.key as keyof typeof answers];
        expect(await store.finalize({ ...params, nowMs: NOW_MS, response: answer })).toBe(true);
      }
      const all = [inFlight, shortLived, ...completed];

      const plain = (await listAll(store, { limit: 10 })).records;
      const withBodies = (await listAll(store, { limit: 10, bodies: true })).records;
      expectExactlyOnce(plain, all);
      for (const listed of [...plain, ...withBodies]) {
        const loaded = await store.load({ scope: listed.scope, key: listed.key });
        const { response: listedResponse, ...rest } = listed;
        const { response: loadedResponse, ...expected } = loaded ?? { response: undefined };
        expect(rest).toEqual(expected);
        if (loadedResponse === null || loadedResponse === undefined) {
          expect(listedResponse).toBeNull();
          continue;
        }
        expect(listedResponse).toMatchObject({
          status: loadedResponse.status,
          headers: loadedResponse.headers,
        });
        expect(listedResponse?.bodyBytes).toBe(loadedResponse.body?.byteLength ?? null);
        expect(listedResponse?.bodyOmitted).toBe(loadedResponse.bodyOmitted);
      }
      for (const listed of plain) if (listed.response !== null) expect('body' in listed.response).toBe(false);
      for (const listed of withBodies) {
        if (listed.response === null) continue;
        const expected = answers[listed.key as keyof typeof answers].body;
        const body = listed.response.body;
        // Compared as one Buffer: vitest's deep equality over 300,000 elements takes a second.
        expect(
          body === null || body === undefined ? body : Buffer.from(body).equals(expected ?? Buffer.alloc(0)),
        ).toBe(expected === null ? null : true);
      }

      const keysIn = async (state: 'in-flight' | 'completed' | 'expired', nowMs: number) =>
        (await listAll(store, { state, nowMs, limit: 2 })).records.map((record) => record.key).sort();
      expect(await keysIn('in-flight', NOW_MS)).toEqual(['in-flight', 'short-lived']);
      expect(await keysIn('completed', NOW_MS)).toEqual(['big', 'empty', 'omitted', 'small']);
      expect(await keysIn('expired', NOW_MS)).toEqual([]);
      expect(await keysIn('expired', NOW_MS + 1_000)).toEqual(['short-lived']);
      expect(await keysIn('in-flight', NOW_MS + 1_000)).toEqual(['in-flight']);
      expect(await keysIn('expired', NOW_MS + 7_200_000)).toHaveLength(all.length);
    });
  });

  test('forget deletes a record in flight, completed, or expired by the clock, answers true once, and touches nothing else', async () => {
    await withVariant(variant, async ({ store }) => {
      const inFlight = reserveParams('{:*', 'in-flight:{x}');
      const completed = reserveParams('{:*', 'completed');
      const expired = { ...reserveParams('{:*', 'expired'), expiresAtMs: NOW_MS + 1 };
      const sameKeyOtherScope = reserveParams('other', 'in-flight:{x}');
      for (const params of [inFlight, completed, expired, sameKeyOtherScope]) await store.reserve(params);
      await store.finalize({ ...completed, nowMs: NOW_MS, response: response('done') });

      expect(await store.forget(inFlight)).toBe(true);
      // The handler still running lost its fence; a retry executes again.
      expect(await store.finalize({ ...inFlight, nowMs: NOW_MS, response: response('late') })).toBe(false);
      expect((await store.reserve(reserveParams('{:*', 'in-flight:{x}'))).outcome).toBe('reserved');
      expect(await store.forget(completed)).toBe(true);
      expect(await store.forget(expired)).toBe(true);
      expect(await store.forget(completed)).toBe(false);
      expect(await store.forget({ scope: '{:*', key: 'never' })).toBe(false);
      expect(await store.load(completed)).toBeUndefined();
      expect(await store.load(sameKeyOtherScope)).toBeDefined();
      expect((await listAll(store, { limit: 10 })).records.map(idOf).sort()).toEqual(
        [inFlight, sameKeyOtherScope].map(idOf).sort(),
      );
      await expect(store.forget({ scope: 's', key: 'k'.repeat(2_000) })).rejects.toSatisfy(isStoreLimitError);
    });
  });

  test('stats counts in flight, lapsed leases, completed and expired records and the oldest in-flight creation; an empty store counts zeros', async () => {
    await withVariant(variant, async ({ store }) => {
      expect(await store.stats({ nowMs: NOW_MS })).toEqual({
        inFlight: 0,
        leaseLapsed: 0,
        completed: 0,
        expired: 0,
        oldestInFlightCreatedAtMs: null,
      });
      const records = [
        reserveParams('s', 'live', NOW_MS),
        reserveParams('s', 'older', NOW_MS - 5_000),
        reserveParams('s', 'lapsed', NOW_MS - 60_000), // its lease ended 30 s ago
        reserveParams('s', 'done-1'),
        reserveParams('s', 'done-2'),
        { ...reserveParams('s', 'expired', NOW_MS - 10_000), expiresAtMs: NOW_MS },
        reserveParams('elsewhere', 'other', NOW_MS - 100_000),
      ];
      for (const params of records) await store.reserve(params);
      for (const params of records.filter((r) => r.key.startsWith('done'))) {
        await store.finalize({ ...params, nowMs: NOW_MS, response: response('x') });
      }
      expect(await store.stats({ nowMs: NOW_MS, scope: 's' })).toEqual({
        inFlight: 3,
        leaseLapsed: 1,
        completed: 2,
        expired: 1,
        oldestInFlightCreatedAtMs: NOW_MS - 60_000,
      });
      expect(await store.stats({ nowMs: NOW_MS })).toMatchObject({
        inFlight: 4,
        leaseLapsed: 2,
        oldestInFlightCreatedAtMs: NOW_MS - 100_000,
      });
      await expect(store.stats({ nowMs: Number.NaN })).rejects.toThrow(RangeError);
    });
  });

  test('a malformed or tampered cursor, or one another store made, is refused with a RangeError', async () => {
    await withVariant(variant, async ({ store, storeAt }) => {
      await seed(store, 's', 10);
      const first = await store.list({ limit: 1, nowMs: NOW_MS });
      const cursor = first.cursor as string;
      expect(cursor).toMatch(/^[A-Za-z0-9_-]+$/);
      const parts = cursorParts(cursor);
      const tampered = [
        '',
        'x',
        '!!!',
        `${cursor}=`,
        cursor.slice(0, -3),
        Buffer.from('{}').toString('base64url'),
        cursorOf([]),
        cursorOf(['r2', ...parts.slice(1)]),
        cursorOf(parts.slice(0, 5)),
        cursorOf([...parts, 'more']),
        cursorOf(parts.map((part, i) => (i === 4 ? 'abc' : part))),
        cursorOf(parts.map((part, i) => (i === 4 ? '-1' : part))),
        cursorOf(parts.map((part, i) => (i === 3 ? 7 : part))),
        cursorOf(parts.map((part, i) => (i === 5 ? ['{%41:b}'] : part))),
        cursorOf(parts.map((part, i) => (i === 5 ? [42] : part))),
        cursorOf(parts.map((part, i) => (i === 5 ? 'x' : part))),
        cursorOf(parts.map((part, i) => (i === 1 ? 'another' : part))),
        encodeRecordCursor({ scope: 's', key: 'k' }), // the SQL and memory stores' cursor
      ];
      for (const bad of tampered) {
        await expect(store.list({ limit: 1, nowMs: NOW_MS, cursor: bad }), bad).rejects.toThrow(RangeError);
      }
      await expect(storeAt('other:').list({ limit: 1, nowMs: NOW_MS, cursor })).rejects.toThrow(RangeError);
      await expect(store.list({ limit: 0, nowMs: NOW_MS })).rejects.toThrow(RangeError);
      await expect(store.list({ limit: MAX_LIST_LIMIT + 1, nowMs: NOW_MS })).rejects.toThrow(RangeError);
      // Nothing was consumed: the cursor still lists the rest.
      const rest = await listAll(store, { limit: 100 });
      expect(rest.records).toHaveLength(10);
      expect((await store.list({ limit: 100, nowMs: NOW_MS, cursor })).records).toHaveLength(9);
    });
  });

  test('stores under prefixes that glob characters tell apart never see each other’s records', async () => {
    await withVariant(variant, async ({ storeAt }) => {
      const suffixes = ['', 'a', 'a*', 'a?', '[a]', 'a\\', 'ab', '*'];
      const made = new Map<string, Awaited<ReturnType<typeof seed>>>();
      for (const suffix of suffixes) made.set(suffix, await seed(storeAt(suffix), `scope-${suffix}`, 2));
      for (const suffix of suffixes) {
        const store = storeAt(suffix);
        expectExactlyOnce((await listAll(store, { limit: 1 })).records, made.get(suffix) ?? []);
        const counts = await store.stats({ nowMs: NOW_MS });
        expect(counts.inFlight + counts.completed).toBe(2);
      }
    });
  });

  test('a record deleted after SCAN returned its name (a name the cursor carries) is skipped, the rest listed once', async () => {
    await withVariant(variant, async ({ store }) => {
      const made = await seed(store, 's', 30);
      const first = await store.list({ limit: 1, nowMs: NOW_MS });
      const pending = cursorParts(first.cursor as string)[5] as string[];
      // A full page looks ahead for one more name, so a cursor of an unfinished listing always carries some.
      expect(pending.length).toBeGreaterThan(0);
      const gone = pending.map((tag) => parseRecordTag(tag) as { scope: string; key: string });
      for (const ref of gone) expect(await store.forget(ref)).toBe(true);
      const rest: (typeof first.records)[number][] = [];
      let cursor = first.cursor;
      while (cursor !== null) {
        const page = await store.list({ limit: 4, nowMs: NOW_MS, cursor });
        rest.push(...page.records);
        cursor = page.cursor;
      }
      const goneIds = new Set(gone.map(idOf));
      expectExactlyOnce(
        [...first.records, ...rest],
        made.filter((params) => !goneIds.has(idOf(params))),
      );
    });
  });

  test('a client closed between pages: the next page and stats fail as faults at once, never hang', async () => {
    await withVariant(variant, async ({ store, close }) => {
      await seed(store, 's', 5);
      const first = await store.list({ limit: 1, nowMs: NOW_MS });
      await close();
      const started = performance.now();
      await expect(store.list({ limit: 1, nowMs: NOW_MS, cursor: first.cursor as string })).rejects.toThrow();
      await expect(store.stats({ nowMs: NOW_MS })).rejects.toThrow();
      await expect(store.forget({ scope: 's', key: 'k' })).rejects.toThrow();
      expect(performance.now() - started).toBeLessThan(2_000);
    });
  });

  test('forget with replicas set goes through WAIT like every write', async () => {
    await withVariant(
      variant,
      async ({ store }) => {
        const params = reserveParams('s', 'waited');
        await store.reserve(params);
        expect(await store.forget(params)).toBe(true);
        expect(await store.forget(params)).toBe(false);
      },
      { replicas: { count: 0, timeoutMs: 100 } },
    );
  });
});
