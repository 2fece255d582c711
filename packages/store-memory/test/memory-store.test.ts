import { createIdempotency, type IdempotencyEvent, isStoreLimitError, type StoredResponse } from '@idem/core';
import { createMemoryStore, type MemoryStoreOptions } from '@idem/store-memory';
import { v7 } from 'uuid';
import { describe, expect, test } from 'vitest';

const response: StoredResponse = { status: 200, headers: {}, body: new Uint8Array(100) };

function params(key: string, nowMs = 0) {
  return {
    scope: 's',
    key,
    fingerprint: 'f',
    owner: `owner-${key}`,
    nowMs,
    leaseUntilMs: nowMs + 1_000,
    expiresAtMs: nowMs + 10_000,
  };
}

async function complete(store: ReturnType<typeof createMemoryStore>, key: string, nowMs = 0) {
  await store.reserve(params(key, nowMs));
  await store.finalize({ scope: 's', key, owner: `owner-${key}`, response, nowMs });
}

/** A store with `bounds` and no sweep, and the events it reports. */
function recordingEvents(bounds: Pick<MemoryStoreOptions, 'maxEntries' | 'maxSizeBytes'>) {
  const evicted: IdempotencyEvent[] = [];
  const store = createMemoryStore({ ...bounds, sweepIntervalMs: false, onEvent: (e) => evicted.push(e) });
  return { store, evicted };
}

describe('memory store bounds', () => {
  test('completed records are bounded by maxEntries, least recently used first, with an eviction event', async () => {
    const { store, evicted } = recordingEvents({ maxEntries: 3 });
    for (const key of ['a', 'b', 'c']) await complete(store, key);
    await store.load({ scope: 's', key: 'a' }); // a is now more recent than b
    await complete(store, 'd');
    expect(evicted).toEqual([{ type: 'evicted', scope: 's', key: 'b', reason: 'capacity' }]);
    expect(await store.load({ scope: 's', key: 'b' })).toBeUndefined();
    expect(await store.load({ scope: 's', key: 'a' })).toBeDefined();
    expect(store.size).toBe(3);
  });

  test('a record is used when it completes: of keys completed in reverse order, the first completed goes first', async () => {
    const { store, evicted } = recordingEvents({ maxEntries: 2 });
    for (const key of ['r1', 'r2', 'r3']) await store.reserve(params(key));
    for (const key of ['r3', 'r2', 'r1'])
      await store.finalize({ scope: 's', key, owner: `owner-${key}`, response, nowMs: 0 });
    expect(evicted).toEqual([{ type: 'evicted', scope: 's', key: 'r3', reason: 'capacity' }]);
    expect(await store.load({ scope: 's', key: 'r1' })).toBeDefined();
    expect(await store.load({ scope: 's', key: 'r2' })).toBeDefined();
  });

  test('a request that ran long is not the first evicted when it completes', async () => {
    const { store, evicted } = recordingEvents({ maxEntries: 2 });
    await store.reserve(params('slow')); // reserved first, completed last
    for (const key of ['a', 'b']) await complete(store, key);
    await store.finalize({ scope: 's', key: 'slow', owner: 'owner-slow', response, nowMs: 0 });
    expect(evicted).toEqual([{ type: 'evicted', scope: 's', key: 'a', reason: 'capacity' }]);
    await complete(store, 'c');
    expect(evicted.map((e) => (e as { key: string }).key)).toEqual(['a', 'b']);
    expect(await store.load({ scope: 's', key: 'slow' })).toBeDefined();
  });

  test('maxEntries: 0 with maxSizeBytes bounds the completed records by their bytes alone', async () => {
    const store = createMemoryStore({ maxEntries: 0, maxSizeBytes: 1_000, sweepIntervalMs: false });
    for (let i = 0; i < 20; i++) await complete(store, `k${i}`);
    expect(store.size).toBeGreaterThan(0);
    expect(store.size).toBeLessThan(20);
    expect(await store.load({ scope: 's', key: 'k19' })).toBeDefined();
    expect(await store.load({ scope: 's', key: 'k0' })).toBeUndefined();
  });

  test('in-flight reservations are never evicted, however many there are', async () => {
    const store = createMemoryStore({ maxEntries: 2, sweepIntervalMs: false });
    const keys = Array.from({ length: 50 }, () => v7());
    for (const key of keys) await store.reserve(params(key));
    for (const key of ['x', 'y', 'z']) await complete(store, key);
    for (const key of keys) expect((await store.load({ scope: 's', key }))?.owner).toBe(`owner-${key}`);
    expect(store.size).toBe(52);
  });

  test('maxSizeBytes bounds the stored bodies', async () => {
    const store = createMemoryStore({ maxSizeBytes: 1_000, sweepIntervalMs: false });
    for (let i = 0; i < 10; i++) await complete(store, `k${i}`);
    expect(store.size).toBeLessThanOrEqual(3); // each record counts 256 + 100 bytes
  });

  test('a record larger than maxSizeBytes is refused with a IdemStoreLimitError, never dropped in silence', async () => {
    const { store, evicted } = recordingEvents({ maxSizeBytes: 300 });
    await store.reserve(params('big'));
    const big = { status: 200, headers: {}, body: new Uint8Array(1_000) };
    const finalize = store.finalize({ scope: 's', key: 'big', owner: 'owner-big', response: big, nowMs: 0 });
    await expect(finalize).rejects.toSatisfy(isStoreLimitError);
    expect((await store.load({ scope: 's', key: 'big' }))?.response).toBeNull(); // still in flight, releasable
    expect(store.limits).toEqual({ maxBodyBytes: 300 - 256 });
    expect(evicted).toEqual([]); // refused, not stored and then evicted
  });

  test('with the coordinator: a body over the bound is stored as omitted, and the retry replays it', async () => {
    const store = createMemoryStore({ maxSizeBytes: 1_000, sweepIntervalMs: false });
    const idem = createIdempotency({ store, heartbeatIntervalMs: false });
    const request = { method: 'POST', route: '/r', key: v7() };
    const first = await idem.begin(request);
    if (first.action !== 'execute') throw new Error(first.action);
    expect(await first.execution.finish({ status: 201, headers: {}, body: Buffer.alloc(5_000) })).toBe(
      'finalized',
    );
    const retry = await idem.begin(request);
    expect(retry.action === 'replay' && retry.response.headers['idempotent-replay-body-omitted']).toBe(
      'true',
    );
  });

  test('the sweep removes expired records on its own, by the injected clock', async () => {
    let nowMs = 0;
    const store = createMemoryStore({ sweepIntervalMs: 10, clock: { nowMs: () => nowMs } });
    await complete(store, 'old');
    await store.reserve(params('in-flight'));
    await complete(store, 'young', 5_000);
    nowMs = 10_001;
    await new Promise((resolve) => setTimeout(resolve, 40));
    expect(await store.load({ scope: 's', key: 'old' })).toBeUndefined();
    expect(await store.load({ scope: 's', key: 'in-flight' })).toBeUndefined();
    expect(await store.load({ scope: 's', key: 'young' })).toBeDefined();
    await store.close();
  });

  test('an expired record is replaced on reserve even before any sweep', async () => {
    const store = createMemoryStore({ sweepIntervalMs: false });
    await complete(store, 'k');
    const result = await store.reserve({ ...params('k', 10_000), fingerprint: 'other' });
    expect(result.outcome).toBe('reserved');
  });
});

describe('memory store record ids', () => {
  test('(scope, key) pairs that would read alike as one string are distinct records', async () => {
    const store = createMemoryStore({ sweepIntervalMs: false });
    // An unscoped key is its own id unless it holds a ':'; a scoped one is length-prefixed.
    const pairs = [
      ['', '1:xy'],
      ['x', 'y'],
      ['', 'xy'],
      ['', '0:xy'],
      ['0', ':xy'],
      ['1:x', 'y'],
    ] as const;
    for (const [scope, key] of pairs) {
      const reserved = await store.reserve({ ...params(key), scope, owner: `${scope}|${key}` });
      expect(reserved.outcome).toBe('reserved');
    }
    for (const [scope, key] of pairs) {
      expect((await store.load({ scope, key }))?.owner).toBe(`${scope}|${key}`);
      expect(await store.finalize({ scope, key, owner: `${scope}|${key}`, response, nowMs: 0 })).toBe(true);
    }
    expect(store.size).toBe(pairs.length);
  });
});
