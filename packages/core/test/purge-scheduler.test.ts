import { type IdempotencyEvent, purgeExpiredInBatches, startPurgeScheduler } from '@idem/core';
import { describe, expect, test } from 'vitest';
import { createTestStore } from './support/test-store.js';

async function seedExpired(backend: ReturnType<typeof createTestStore>, count: number) {
  for (let i = 0; i < count; i++) {
    await backend.store.reserve({
      scope: 's',
      key: `k${i}`,
      fingerprint: 'f',
      owner: 'o',
      nowMs: 0,
      leaseUntilMs: 1,
      expiresAtMs: 10,
    });
  }
}

describe('purge', () => {
  test('purgeExpiredInBatches loops until a batch comes back short', async () => {
    const backend = createTestStore();
    await seedExpired(backend, 25);
    backend.calls.length = 0;
    expect(await purgeExpiredInBatches(backend.store, { beforeMs: 11, batchSize: 10 })).toEqual({
      count: 25,
      batches: 3,
    });
    expect(backend.calls).toEqual(['purgeExpired', 'purgeExpired', 'purgeExpired']);
  });

  test('purgeExpiredInBatches stops at maxBatches', async () => {
    const backend = createTestStore();
    await seedExpired(backend, 25);
    expect(await purgeExpiredInBatches(backend.store, { beforeMs: 11, batchSize: 5, maxBatches: 2 })).toEqual(
      {
        count: 10,
        batches: 2,
      },
    );
  });

  test('the scheduler purges on its timer, reports counts, and stops', async () => {
    const backend = createTestStore();
    await seedExpired(backend, 7);
    const events: IdempotencyEvent[] = [];
    const stop = startPurgeScheduler({
      store: backend.store,
      intervalMs: 10,
      batchSize: 3,
      clock: { nowMs: () => 100 },
      onEvent: (event) => events.push(event),
    });
    await new Promise((resolve) => setTimeout(resolve, 60));
    await stop();
    expect(backend.records.size).toBe(0);
    expect(events[0]).toMatchObject({ type: 'purged', count: 7, batches: 3 });
    const calls = backend.calls.length;
    await new Promise((resolve) => setTimeout(resolve, 40));
    expect(backend.calls.length).toBe(calls);
  });

  test('a failing purge is reported as an event and the scheduler goes on', async () => {
    const backend = createTestStore();
    backend.inject('purgeExpired', 'throw');
    const events: IdempotencyEvent[] = [];
    const stop = startPurgeScheduler({
      store: backend.store,
      intervalMs: 10,
      onEvent: (e) => events.push(e),
    });
    await new Promise((resolve) => setTimeout(resolve, 60));
    await stop();
    expect(events.length).toBeGreaterThanOrEqual(2);
    expect(events[0]).toMatchObject({ type: 'store-error', operation: 'purgeExpired' });
  });
});
