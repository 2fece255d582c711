import { decodeRecordCursor, type IdempotencyEvent, type ListParams, type RecordPage } from '@idem/core';
import { createMemoryStore, type MemoryStore } from '@idem/store-memory';
import { describe, expect, test } from 'vitest';

const NOW_MS = Date.UTC(2030, 0, 1);

const reserve = (store: MemoryStore, scope: string, key: string, expiresAtMs = NOW_MS + 60_000) =>
  store.reserve({
    scope,
    key,
    fingerprint: 'f',
    owner: `owner-${key}`,
    nowMs: NOW_MS,
    leaseUntilMs: NOW_MS + 1_000,
    expiresAtMs,
  });

/** Every page from `params` on, and the (scope, key) of each record, in order. */
async function pages(store: MemoryStore, params: Omit<ListParams, 'nowMs'>) {
  const refs: [string, string][] = [];
  const all: RecordPage[] = [];
  let cursor = params.cursor;
  do {
    const page = await store.list({ ...params, nowMs: NOW_MS, ...(cursor === undefined ? {} : { cursor }) });
    all.push(page);
    refs.push(...page.records.map((r) => [r.scope, r.key] as [string, string]));
    cursor = page.cursor ?? undefined;
  } while (cursor !== undefined);
  return { refs, pages: all };
}

describe('memory store: list, stats and forget', () => {
  test('an empty store lists nothing and counts nothing', async () => {
    const store = createMemoryStore({ sweepIntervalMs: false });
    expect(await store.list({ limit: 1, nowMs: NOW_MS })).toEqual({ records: [], cursor: null });
    expect(await store.stats({ nowMs: NOW_MS })).toEqual({
      inFlight: 0,
      leaseLapsed: 0,
      completed: 0,
      expired: 0,
      oldestInFlightCreatedAtMs: null,
    });
    expect(await store.forget({ scope: '', key: '' })).toBe(false);
  });

  test('list orders by scope, then key, by UTF-16 code units, whatever the characters; the last page says so', async () => {
    const store = createMemoryStore({ sweepIntervalMs: false });
    const scopes = ['b', 'a', 'a%', 'a_', 'A', '', 'a\\', "a'", '\u{1F600}', '\uffff', 'é'];
    for (const scope of scopes)
      for (const key of ['2', '10', '1', '%', '_']) await reserve(store, scope, key);
    const { refs, pages: all } = await pages(store, { limit: 4 });
    const expected = scopes
      .flatMap((scope) => ['2', '10', '1', '%', '_'].map((key) => [scope, key] as [string, string]))
      .sort(([s1, k1], [s2, k2]) => (s1 < s2 ? -1 : s1 > s2 ? 1 : k1 < k2 ? -1 : k1 > k2 ? 1 : 0));
    expect(refs).toEqual(expected);
    expect(all.length).toBe(Math.ceil(expected.length / 4)); // a full last page ends with a null cursor
    expect(all.at(-1)?.cursor).toBeNull();
    // '\uffff' (one code unit) sorts after the emoji (a surrogate pair, 0xd83d …): code units, not code points.
    expect(refs.findIndex(([s]) => s === '\uffff')).toBeGreaterThan(
      refs.findIndex(([s]) => s === '\u{1F600}'),
    );
  });

  test('keyset paging lists each record present throughout exactly once while records come and go between pages', async () => {
    const store = createMemoryStore({ sweepIntervalMs: false });
    const keys = Array.from({ length: 30 }, (_, i) => `k${String(i).padStart(2, '0')}`);
    for (const key of keys) await reserve(store, 's', key);
    const seen: string[] = [];
    let page = await store.list({ scope: 's', limit: 7, nowMs: NOW_MS });
    let round = 0;
    while (true) {
      seen.push(...page.records.map((r) => r.key));
      if (page.cursor === null) break;
      // Between pages: the record the cursor stands on goes, one ahead goes, two arrive behind and one ahead.
      const at = decodeRecordCursor(page.cursor).key;
      await store.release({ scope: 's', key: at, owner: `owner-${at}` });
      const ahead = keys.find((key) => key > at && !seen.includes(key) && key.endsWith('9'));
      if (ahead !== undefined) await store.release({ scope: 's', key: ahead, owner: `owner-${ahead}` });
      await reserve(store, 's', `a${round}`);
      await reserve(store, 's', `${at}+`);
      round++;
      page = await store.list({ scope: 's', limit: 7, nowMs: NOW_MS, cursor: page.cursor });
    }
    expect(new Set(seen).size).toBe(seen.length); // never twice
    const removedAhead = keys.filter((key) => key.endsWith('9') && !seen.includes(key));
    for (const key of keys) if (!removedAhead.includes(key)) expect(seen).toContain(key);
    expect(seen.filter((key) => key.startsWith('a'))).toEqual([]); // arrived behind the cursor: not listed
    expect(seen.filter((key) => key.endsWith('+')).length).toBeGreaterThan(0); // arrived ahead: listed
  });

  test('a cursor is a position: with another scope filter, paging goes on after it in that filter', async () => {
    const store = createMemoryStore({ sweepIntervalMs: false });
    for (const scope of ['a', 'b', 'c']) for (const key of ['1', '2', '3']) await reserve(store, scope, key);
    const inB = await store.list({ scope: 'b', limit: 1, nowMs: NOW_MS });
    const cursor = inB.cursor as string;
    expect((await pages(store, { scope: 'b', limit: 10, cursor })).refs).toEqual([
      ['b', '2'],
      ['b', '3'],
    ]);
    expect((await pages(store, { scope: 'c', limit: 10, cursor })).refs.length).toBe(3); // all of c is after it
    expect((await pages(store, { scope: 'a', limit: 10, cursor })).refs).toEqual([]); // all of a is before it
    expect((await pages(store, { limit: 2, cursor })).refs).toEqual([
      ['b', '2'],
      ['b', '3'],
      ['c', '1'],
      ['c', '2'],
      ['c', '3'],
    ]);
  });

  test('list and stats do not touch recency: the least recently used record is still evicted first', async () => {
    const evicted: IdempotencyEvent[] = [];
    const store = createMemoryStore({
      maxEntries: 2,
      sweepIntervalMs: false,
      onEvent: (e) => evicted.push(e),
    });
    const complete = async (key: string) => {
      await reserve(store, 's', key);
      const response = { status: 200, headers: {}, body: null };
      await store.finalize({ scope: 's', key, owner: `owner-${key}`, response, nowMs: NOW_MS });
    };
    await complete('a');
    await complete('b');
    await store.list({ limit: 10, nowMs: NOW_MS, bodies: true });
    await store.stats({ nowMs: NOW_MS });
    await complete('c');
    expect(evicted).toEqual([{ type: 'evicted', scope: 's', key: 'a', reason: 'capacity' }]);
  });

  test('forget deletes an in-flight or a completed record without an eviction event, and the size says so', async () => {
    const evicted: IdempotencyEvent[] = [];
    const store = createMemoryStore({ sweepIntervalMs: false, onEvent: (e) => evicted.push(e) });
    await reserve(store, 's', 'flying');
    await reserve(store, 's', 'done');
    await store.finalize({
      scope: 's',
      key: 'done',
      owner: 'owner-done',
      response: { status: 201, headers: {}, body: new Uint8Array([1]) },
      nowMs: NOW_MS,
    });
    expect(store.size).toBe(2);
    expect(await store.forget({ scope: 's', key: 'done' })).toBe(true);
    expect(await store.forget({ scope: 's', key: 'flying' })).toBe(true);
    expect(store.size).toBe(0);
    expect(evicted).toEqual([]);
  });

  test('stats counts every record once, in flight and completed apart, an expired one as expired', async () => {
    const store = createMemoryStore({ sweepIntervalMs: false });
    await reserve(store, 's', 'live');
    await reserve(store, 's', 'gone', NOW_MS + 10);
    await reserve(store, 't', 'done');
    await store.finalize({
      scope: 't',
      key: 'done',
      owner: 'owner-done',
      response: { status: 200, headers: {}, body: null },
      nowMs: NOW_MS,
    });
    expect(await store.stats({ nowMs: NOW_MS + 1_000 })).toEqual({
      inFlight: 1,
      leaseLapsed: 1,
      completed: 1,
      expired: 1,
      oldestInFlightCreatedAtMs: NOW_MS,
    });
    await expect(store.stats({ nowMs: 1.5 })).rejects.toThrow(RangeError);
  });
});
