import type { IdempotencyEvent, IdempotencyStore, MaybePromise, StoredResponse } from '@idem/core';
import { storeConformance } from '@idem/store-conformance';
import { createMemoryStore, withReplayCache } from '@idem/store-memory';
import { v7 } from 'uuid';
import { describe, expect, test } from 'vitest';

// Each instance is a node with a cache of its own over the one shared store, as several processes would be.
describe('withReplayCache over the memory store', () => {
  storeConformance(
    { describe, test },
    () => {
      const inner = createMemoryStore({ sweepIntervalMs: false });
      return {
        store: withReplayCache(inner),
        connect: async () => ({ ...withReplayCache(inner), close: async () => {} }),
        cleanup: () => inner.close(),
      };
    },
    { inspection: ['forget', 'list', 'stats'] },
  );
});

const NOW_MS = Date.UTC(2030, 0, 1);
const response: StoredResponse = {
  status: 201,
  headers: { location: '/o/1' },
  body: new Uint8Array([1, 2, 3]),
};

/** A memory store that counts the calls that reach it. */
function counted() {
  const inner = createMemoryStore({ sweepIntervalMs: false, maxSizeBytes: 10_000 });
  const calls: string[] = [];
  const count =
    <A, R>(name: string, fn: (a: A) => MaybePromise<R>) =>
    (a: A): MaybePromise<R> => {
      calls.push(name);
      return fn(a);
    };
  const store: IdempotencyStore = {
    limits: inner.limits ?? {},
    reserve: count('reserve', (p) => inner.reserve(p)),
    load: count('load', (p) => inner.load(p)),
    finalize: count('finalize', (p) => inner.finalize(p)),
    release: count('release', (p) => inner.release(p)),
    renewLease: count('renewLease', (p) => inner.renewLease(p)),
    purgeExpired: count('purgeExpired', (p) => inner.purgeExpired(p)),
    close: () => count('close', () => inner.close())(undefined),
  };
  return { store, calls };
}

const params = (key: string, nowMs = NOW_MS) => ({
  scope: 's',
  key,
  fingerprint: 'f',
  owner: `owner-${key}`,
  nowMs,
  leaseUntilMs: nowMs + 1_000,
  expiresAtMs: NOW_MS + 10_000,
});

describe('withReplayCache', () => {
  test('a completed record is answered from memory until it expires, then the store is asked again', async () => {
    const { store, calls } = counted();
    const events: IdempotencyEvent[] = [];
    const cached = withReplayCache(store, { onEvent: (e) => events.push(e), clock: { nowMs: () => NOW_MS } });
    await cached.reserve(params('k'));
    await cached.finalize({ scope: 's', key: 'k', owner: 'owner-k', response, nowMs: NOW_MS });
    expect((await cached.reserve(params('k', NOW_MS + 1))).outcome).toBe('exists'); // miss: fills the cache
    calls.length = 0;
    for (let i = 0; i < 5; i++) {
      const again = await cached.reserve(params('k', NOW_MS + 9_999));
      expect(again.outcome === 'exists' && again.record.response).toEqual(response);
      expect((await cached.load({ scope: 's', key: 'k' }))?.response).toEqual(response);
    }
    expect(calls).toEqual([]); // no round trip at all
    const expired = await cached.reserve(params('k', NOW_MS + 10_000)); // nowMs === expiresAtMs: gone
    expect(expired.outcome).toBe('reserved');
    expect(calls).toEqual(['reserve']);
    const kinds = events.map((e) => (e.type === 'cache' ? `${e.operation}:${e.outcome}` : e.type));
    expect(kinds.slice(0, 3)).toEqual(['reserve:miss', 'reserve:miss', 'reserve:hit']);
    expect(kinds.at(-1)).toBe('reserve:miss');
  });

  test('in-flight records are never cached; fenced calls and purges always reach the store', async () => {
    const { store, calls } = counted();
    const cached = withReplayCache(store);
    await cached.reserve(params('k'));
    await cached.reserve(params('k'));
    await cached.load({ scope: 's', key: 'k' });
    await cached.load({ scope: 's', key: 'k' });
    expect(calls).toEqual(['reserve', 'reserve', 'load', 'load']);
    calls.length = 0;
    expect(
      await cached.renewLease({ scope: 's', key: 'k', owner: 'owner-k', leaseUntilMs: NOW_MS + 5 }),
    ).toBe(true);
    expect(await cached.release({ scope: 's', key: 'k', owner: 'owner-k' })).toBe(true);
    expect(await cached.finalize({ scope: 's', key: 'k', owner: 'owner-k', response, nowMs: NOW_MS })).toBe(
      false,
    );
    expect(await cached.purgeExpired({ beforeMs: 0, limit: 10 })).toBe(0);
    expect(calls).toEqual(['renewLease', 'release', 'finalize', 'purgeExpired']);
  });

  test('load checks expiry with its clock; an expired cached record is dropped', async () => {
    let nowMs = NOW_MS;
    const { store, calls } = counted();
    const cached = withReplayCache(store, { clock: { nowMs: () => nowMs } });
    await cached.reserve(params('k'));
    await cached.finalize({ scope: 's', key: 'k', owner: 'owner-k', response, nowMs });
    await cached.load({ scope: 's', key: 'k' });
    calls.length = 0;
    await cached.load({ scope: 's', key: 'k' });
    expect(calls).toEqual([]);
    nowMs = NOW_MS + 10_000;
    await cached.load({ scope: 's', key: 'k' });
    expect(calls).toEqual(['load']);
  });

  test('bounded by maxEntries and maxBytes; limits and close are the store', async () => {
    const { store, calls } = counted();
    const cached = withReplayCache(store, { maxEntries: 2 });
    expect(cached.limits).toEqual(store.limits);
    for (const key of ['a', 'b', 'c']) {
      await cached.reserve(params(key));
      await cached.finalize({ scope: 's', key, owner: `owner-${key}`, response, nowMs: NOW_MS });
      await cached.reserve(params(key, NOW_MS + 1));
    }
    calls.length = 0;
    for (const key of ['c', 'b', 'a']) await cached.reserve(params(key, NOW_MS + 2));
    expect(calls).toEqual(['reserve']); // a was evicted
    const small = withReplayCache(store, { maxBytes: 300 });
    const big = { ...response, body: new Uint8Array(1_000) };
    await small.reserve(params('big'));
    await small.finalize({ scope: 's', key: 'big', owner: 'owner-big', response: big, nowMs: NOW_MS });
    calls.length = 0;
    await small.reserve(params('big', NOW_MS + 1));
    await small.reserve(params('big', NOW_MS + 1));
    expect(calls).toEqual(['reserve', 'reserve']); // too big to cache, still answered
    await cached.close?.();
    expect(calls.at(-1)).toBe('close');
    expect(() => withReplayCache(store, { maxBytes: 0 })).toThrow(RangeError);
  });

  test('separate caches over one store (two nodes) both replay the one answer; a new owner is never cached', async () => {
    const inner = createMemoryStore({ sweepIntervalMs: false });
    const [a, b] = [withReplayCache(inner), withReplayCache(inner)];
    const key = v7();
    await a.reserve(params(key));
    expect((await b.reserve(params(key))).outcome).toBe('exists');
    await a.finalize({ scope: 's', key, owner: `owner-${key}`, response, nowMs: NOW_MS });
    const seen = await b.reserve(params(key, NOW_MS + 1));
    expect(seen.outcome === 'exists' && seen.record.response).toEqual(response);
  });

  test('replayCache (for reserves in a transaction): get answers from memory only, keep takes completed, live records', async () => {
    const { store, calls } = counted();
    const events: IdempotencyEvent[] = [];
    const cached = withReplayCache(store, { onEvent: [(event) => events.push(event)] });
    const cache = cached.replayCache;
    if (cache === undefined) throw new Error('withReplayCache has no replayCache');
    const key = v7();
    const ref = { scope: 's', key };
    await store.reserve(params(key));
    const inFlight = await store.load(ref);
    if (inFlight === undefined) throw new Error('not reserved');
    calls.length = 0;
    expect(cache.get(ref, NOW_MS)).toBeUndefined(); // nothing kept, and the store is not asked
    cache.keep(inFlight, NOW_MS); // in flight: not kept
    expect(cache.get(ref, NOW_MS)).toBeUndefined();
    await store.finalize({ ...ref, owner: `owner-${key}`, response, nowMs: NOW_MS });
    const completed = await store.load(ref);
    if (completed === undefined) throw new Error('not finalized');
    cache.keep(completed, completed.expiresAtMs); // expired at that moment: not kept
    expect(cache.get(ref, NOW_MS)).toBeUndefined();
    calls.length = 0;
    cache.keep(completed, NOW_MS);
    expect(cache.get(ref, NOW_MS)).toBe(completed);
    expect(cache.get({ scope: 'other', key }, NOW_MS)).toBeUndefined(); // scopes stay apart
    expect(cache.get(ref, completed.expiresAtMs)).toBeUndefined(); // past its expiry: dropped
    expect(cache.get(ref, NOW_MS)).toBeUndefined();
    expect(calls).toEqual([]);
    // And the wrapper's own reserve answers from what keep took.
    cache.keep(completed, NOW_MS);
    expect((await cached.reserve(params(key))).outcome).toBe('exists');
    expect(calls).toEqual([]);
    const outcomes = events.map((event) => (event.type === 'cache' ? event.outcome : event.type));
    expect(outcomes).toEqual(['miss', 'miss', 'miss', 'hit', 'miss', 'miss', 'miss', 'hit']);
  });
});

describe('withReplayCache and the inspection methods', () => {
  test('forget deletes in the store and drops the cached record, so this node stops replaying it', async () => {
    const inner = createMemoryStore({ sweepIntervalMs: false });
    const cached = withReplayCache(inner, { clock: { nowMs: () => NOW_MS } });
    const key = v7();
    const ref = { scope: 's', key };
    await cached.reserve(params(key));
    await cached.finalize({ ...ref, owner: `owner-${key}`, response, nowMs: NOW_MS });
    expect((await cached.reserve(params(key, NOW_MS + 1))).outcome).toBe('exists'); // now cached
    expect(cached.replayCache?.get(ref, NOW_MS + 1)).toBeDefined();
    expect(await cached.forget?.(ref)).toBe(true);
    expect(await inner.load(ref)).toBeUndefined();
    expect(cached.replayCache?.get(ref, NOW_MS + 1)).toBeUndefined();
    expect(await cached.load(ref)).toBeUndefined();
    const again = await cached.reserve(params(key, NOW_MS + 2));
    expect(again.outcome).toBe('reserved'); // executes again, on this node too
    expect(await cached.forget?.(ref)).toBe(true);
    expect(await cached.forget?.(ref)).toBe(false);
  });

  test('a read on its way while forget runs does not put the forgotten record back in the cache', async () => {
    const inner = createMemoryStore({ sweepIntervalMs: false });
    const key = v7();
    const ref = { scope: 's', key };
    await inner.reserve(params(key));
    await inner.finalize({ ...ref, owner: `owner-${key}`, response, nowMs: NOW_MS });
    const stale = await inner.load(ref);
    // A store whose load read the record before the forget, and answers after it.
    let answer: (() => void) | undefined;
    const slow: IdempotencyStore = {
      ...inner,
      load: async () => {
        await new Promise<void>((resolve) => {
          answer = resolve;
        });
        return stale;
      },
      forget: (r) => inner.forget(r),
    };
    const cached = withReplayCache(slow, { clock: { nowMs: () => NOW_MS } });
    const loading = cached.load(ref);
    expect(await cached.forget?.(ref)).toBe(true);
    answer?.();
    expect(await loading).toBe(stale); // what the store answered, as it answered it
    expect(cached.replayCache?.get(ref, NOW_MS)).toBeUndefined(); // but not kept
    cached.replayCache?.keep(stale as NonNullable<typeof stale>, NOW_MS); // nor offered by a transactional reserve
    expect(cached.replayCache?.get(ref, NOW_MS)).toBeUndefined();
    expect((await cached.reserve(params(key, NOW_MS + 1))).outcome).toBe('reserved');
  });

  test('list and stats are the store’s; none of the three appears over a store without it', async () => {
    const inner = createMemoryStore({ sweepIntervalMs: false });
    const cached = withReplayCache(inner);
    await cached.reserve(params('a'));
    expect(await cached.stats?.({ nowMs: NOW_MS })).toEqual(await inner.stats({ nowMs: NOW_MS }));
    expect(await cached.list?.({ limit: 10, nowMs: NOW_MS })).toEqual(
      await inner.list({ limit: 10, nowMs: NOW_MS }),
    );
    const { store } = counted(); // reserve … purgeExpired and close only
    const bare = withReplayCache(store);
    for (const method of ['forget', 'list', 'stats'] as const) expect(method in bare).toBe(false);
    const { list: _list, ...withoutList } = inner;
    const partial = withReplayCache(withoutList as IdempotencyStore);
    expect(['forget' in partial, 'list' in partial, 'stats' in partial]).toEqual([true, false, true]);
  });
});
