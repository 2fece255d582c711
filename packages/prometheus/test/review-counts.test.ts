import { total } from '@idem/adapter-suite';
import {
  createIdempotency,
  type IdempotencyEvent,
  type IdempotencyStore,
  IdemStoreLimitError,
} from '@idem/core';
import { createIdempotencyMetrics } from '@idem/prometheus';
import { createMemoryStore } from '@idem/store-memory';
import { Registry } from 'prom-client';
import { v7 } from 'uuid';
import { describe, expect, test } from 'vitest';
import { scrape } from './support/scrape.js';

// Found by attacking issue 18 item 8 (a lost lease counted once per execution, a store limit at finalize once
// per request).

const ROUTE = '/v1/orders/:id';
const answer = { status: 201, headers: { 'content-type': 'text/plain' }, body: 'made' };

/** A store whose finalize refuses any body as a limit, then does `then` with the smaller record. */
function refusingBodies(then: 'fault' | 'lost' | 'store') {
  const memory = createMemoryStore({ sweepIntervalMs: false });
  const store: IdempotencyStore = {
    ...memory,
    async finalize(params) {
      if (params.response.body !== null) throw new IdemStoreLimitError('body too large');
      if (then === 'fault') throw new Error('connection reset');
      if (then === 'lost') return false;
      return memory.finalize(params);
    },
  };
  return store;
}

async function run(then: 'fault' | 'lost' | 'store') {
  const registry = new Registry();
  const metrics = createIdempotencyMetrics({ registry });
  const idem = createIdempotency({
    store: refusingBodies(then),
    heartbeatIntervalMs: false,
    onEvent: [metrics.onEvent],
  });
  const result = await idem.begin({ method: 'POST', route: ROUTE, key: v7(), body: { a: 1 } });
  if (result.action !== 'execute') throw new Error(`not executed: ${result.action}`);
  const outcome = await result.execution.finish(answer);
  return { outcome, samples: await scrape(registry) };
}

const errorsOf = (samples: Awaited<ReturnType<typeof scrape>>, type: string) =>
  total(samples, 'idempotency_errors_total', { error_type: type });

describe('review: a store limit at finalize is counted once per request, however the execution ends', () => {
  test('kept smaller: one', async () => {
    const { outcome, samples } = await run('store');
    expect(outcome).toBe('finalized');
    expect(errorsOf(samples, 'store_limit')).toBe(1);
  });

  test('the smaller record then fails as a fault: one store_limit and one store_unavailable (before: no store_limit)', async () => {
    const { outcome, samples } = await run('fault');
    expect(outcome).toBe('store-error');
    expect(errorsOf(samples, 'store_limit')).toBe(1);
    expect(errorsOf(samples, 'store_unavailable')).toBe(1);
  });

  test('the smaller record then finds the lease lost: one store_limit and one lease_lost (before: no store_limit)', async () => {
    const { outcome, samples } = await run('lost');
    expect(outcome).toBe('lease-lost');
    expect(errorsOf(samples, 'store_limit')).toBe(1);
    expect(errorsOf(samples, 'lease_lost')).toBe(1);
  });
});

describe('review: a lost lease is counted once per execution, tracked or not', () => {
  const base = { method: 'POST', route: ROUTE, scope: '', key: 'k', durationMs: 1, executionMs: 2 };
  const reserved = (owner: string): IdempotencyEvent => ({
    type: 'reserved',
    ...base,
    owner,
    tookOver: false,
    elapsedMs: 1,
  });
  const lost = (owner: string, phase: 'heartbeat' | 'finalize' | 'release'): IdempotencyEvent => ({
    type: 'lease-lost',
    ...base,
    owner,
    phase,
    ...(phase === 'heartbeat' ? {} : { status: 201 }),
  });

  test('an execution no longer tracked (past maxTracked): heartbeat then finalize count one (before: two)', async () => {
    const registry = new Registry();
    const metrics = createIdempotencyMetrics({ registry, maxTracked: 1 });
    metrics.onEvent(reserved('a'));
    metrics.onEvent(reserved('b')); // forgets a
    metrics.onEvent(lost('a', 'heartbeat'));
    metrics.onEvent(lost('a', 'finalize'));
    const samples = await scrape(registry);
    expect(total(samples, 'idempotency_lease_losses_total')).toBe(1);
    expect(errorsOf(samples, 'lease_lost')).toBe(1);
  });

  test('forgotten between the heartbeat and the finalize: one', async () => {
    const registry = new Registry();
    const metrics = createIdempotencyMetrics({ registry, maxTracked: 1 });
    metrics.onEvent(reserved('a'));
    metrics.onEvent(lost('a', 'heartbeat'));
    metrics.onEvent(reserved('b')); // forgets a, whose loss was counted
    metrics.onEvent(lost('a', 'release'));
    const samples = await scrape(registry);
    expect(total(samples, 'idempotency_lease_losses_total')).toBe(1);
  });

  test('interleaved owners: each counted once', async () => {
    const registry = new Registry();
    const metrics = createIdempotencyMetrics({ registry });
    metrics.onEvent(reserved('a'));
    metrics.onEvent(reserved('b'));
    metrics.onEvent(lost('a', 'heartbeat'));
    metrics.onEvent(lost('b', 'heartbeat'));
    metrics.onEvent(lost('b', 'finalize'));
    metrics.onEvent(lost('a', 'release'));
    const samples = await scrape(registry);
    expect(total(samples, 'idempotency_lease_losses_total')).toBe(2);
    expect(total(samples, 'idempotency_lease_losses_total', { phase: 'heartbeat' })).toBe(2);
    expect(total(samples, 'idempotency_active_keys_count')).toBe(0);
  });
});
