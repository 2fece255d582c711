import {
  classifyStoreFailure,
  createIdempotency,
  decide,
  IdemInProgressError,
  type IdempotencyRecord,
  IdemStoreLimitError,
  isCompleted,
  recordState,
} from '@idem/core';
import { describe, expect, test, vi } from 'vitest';
import { created, expectExecute, post } from './support/coordinator.js';
import { createTestStore } from './support/test-store.js';

const record = (overrides: Partial<IdempotencyRecord> = {}): IdempotencyRecord => ({
  scope: '',
  key: 'k',
  fingerprint: 'f',
  owner: 'o',
  leaseUntilMs: 2,
  response: null,
  createdAtMs: 1,
  expiresAtMs: 3,
  ...overrides,
});
const stored = { status: 201, headers: {}, body: null };

describe('decide: one answer per row of design.md’s decision table', () => {
  test.each([
    [
      'reserved, fresh',
      { ok: true, value: { outcome: 'reserved', record: record(), tookOver: false } },
      { answer: 'execute', tookOver: false },
    ],
    [
      'reserved, taken over',
      { ok: true, value: { outcome: 'reserved', record: record(), tookOver: true } },
      { answer: 'execute', tookOver: true },
    ],
    [
      'another fingerprint, even completed',
      { ok: true, value: { outcome: 'exists', record: record({ fingerprint: 'g', response: stored }) } },
      { answer: 'mismatch' },
    ],
    [
      'completed',
      { ok: true, value: { outcome: 'exists', record: record({ owner: null, response: stored }) } },
      { answer: 'replay', response: stored },
    ],
    [
      'in flight',
      { ok: true, value: { outcome: 'exists', record: record() } },
      { answer: 'in-progress', found: 'record' },
    ],
    [
      'a lock wait that ran out',
      { ok: false, error: new IdemInProgressError('lock wait') },
      { answer: 'in-progress', found: 'lock-wait' },
    ],
  ] as const)('%s', (_name, found, decision) => {
    expect(decide(found, 'f')).toEqual(decision);
  });

  test('a refused value is a store limit; anything else a store fault', () => {
    const limit = new IdemStoreLimitError('key too long');
    expect(decide({ ok: false, error: limit }, 'f')).toEqual({ answer: 'store-limit', error: limit });
    const fault = new Error('ECONNRESET');
    expect(decide({ ok: false, error: fault }, 'f')).toEqual({ answer: 'unavailable', error: fault });
    expect(decide({ ok: false, error: undefined }, 'f')).toEqual({ answer: 'unavailable', error: undefined });
    expect([limit, new IdemInProgressError('x'), fault, 'a string'].map(classifyStoreFailure)).toEqual([
      'limit',
      'in-progress',
      'fault',
      'fault',
    ]);
  });

  test('record states by name', () => {
    expect(recordState(record())).toBe('in-flight');
    expect(recordState(record({ response: stored }))).toBe('completed');
    expect(isCompleted(record({ response: stored }))).toBe(true);
  });
});

describe('idem.with: a route’s options over the same timers', () => {
  test('a derived coordinator renews its leases on the one heartbeat of its base', async () => {
    const intervals = vi.spyOn(globalThis, 'setInterval');
    try {
      const backend = createTestStore();
      const base = createIdempotency({ store: backend.store, heartbeatIntervalMs: 60_000 });
      const derived = base.with({ required: true, replayHeaders: ['location'] });
      const first = expectExecute(await base.begin(post()));
      const second = expectExecute(
        await derived.begin(post({ key: '0190b7e2-5a5d-7c3e-8f00-1234567890ac' })),
      );
      expect(intervals).toHaveBeenCalledTimes(1);
      // Another interval is another heartbeat.
      const other = base.with({ heartbeatIntervalMs: 30_000 });
      const third = expectExecute(await other.begin(post({ key: '0190b7e2-5a5d-7c3e-8f00-1234567890ad' })));
      expect(intervals).toHaveBeenCalledTimes(2);
      await Promise.all([first, second, third].map((execution) => execution.finish(created())));
      // The derived options are its own: the replay keeps `location` only.
      const replay = await derived.begin(post({ key: '0190b7e2-5a5d-7c3e-8f00-1234567890ac' }));
      expect(replay.action === 'replay' && Object.keys(replay.response.headers).sort()).toEqual([
        'idempotent-replayed',
        'location',
      ]);
      expect((await derived.begin(post({ key: undefined }))).action).toBe('reject');
    } finally {
      intervals.mockRestore();
    }
  });
});
