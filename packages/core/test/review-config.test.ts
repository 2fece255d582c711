import { createIdempotency } from '@idem/core';
import { expect, test } from 'vitest';
import { createTestStore } from './support/test-store.js';

// Review: timing options that would make a request poll or renew for ever are refused where they are given.

test.each([
  [{ inFlight: { strategy: 'wait', initialPollMs: 0 } }, 'inFlight.initialPollMs'],
  [{ inFlight: { strategy: 'wait', initialPollMs: -5 } }, 'inFlight.initialPollMs'],
  [{ inFlight: { strategy: 'wait', maxPollMs: 0 } }, 'inFlight.maxPollMs'],
  [{ inFlight: { strategy: 'wait', maxWaitMs: -1 } }, 'inFlight.maxWaitMs'],
  [{ inFlight: { strategy: 'wait', maxWaitMs: Number.NaN } }, 'inFlight.maxWaitMs'],
  [{ heartbeatIntervalMs: 0 }, 'heartbeatIntervalMs'],
  [{ heartbeatIntervalMs: -1 }, 'heartbeatIntervalMs'],
] as const)('%o is refused with a RangeError naming %s', (options, name) => {
  expect(() => createIdempotency({ store: createTestStore().store, ...options })).toThrow(
    expect.objectContaining({ name: 'RangeError', message: expect.stringContaining(name) }),
  );
});

test('a wait of 0 ms is allowed: an in-flight key is answered at once', () => {
  expect(() =>
    createIdempotency({ store: createTestStore().store, inFlight: { strategy: 'wait', maxWaitMs: 0 } }),
  ).not.toThrow();
});
