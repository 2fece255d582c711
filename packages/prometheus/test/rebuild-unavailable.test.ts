import { total } from '@idem/adapter-suite';
import { createIdempotency, IdemStoreUnavailableError } from '@idem/core';
import { createIdempotencyMetrics } from '@idem/prometheus';
import { createMemoryStore } from '@idem/store-memory';
import { Registry } from 'prom-client';
import { v7 } from 'uuid';
import { expect, test } from 'vitest';
import { scrape } from './support/scrape.js';

// A rebuildReplay that throws IdemStoreUnavailableError answers a retryable 503 instead of the replay: the metrics
// count what the client got, a 503 (the failed read), and no replay.

test('a replay whose rebuild cannot read (answered 503) is not counted as a replay answered 200', async () => {
  const registry = new Registry();
  const metrics = createIdempotencyMetrics({ registry });
  let failing = false;
  const idem = createIdempotency({
    store: createMemoryStore({ sweepIntervalMs: false }),
    heartbeatIntervalMs: false,
    onEvent: [metrics.onEvent],
    rebuildReplay: () => {
      if (failing) throw new IdemStoreUnavailableError('the table cannot be read now');
      return undefined;
    },
  });
  const request = { method: 'POST', route: '/v1/orders', key: v7(), body: { a: 1 } };
  const first = await idem.begin(request);
  if (first.action !== 'execute') throw new Error(first.action);
  await first.execution.finish({ status: 200, headers: {}, body: 'made' });
  failing = true;
  const retry = await idem.begin(request);
  expect(retry.action).toBe('reject');
  expect(retry.action === 'reject' && retry.error.status).toBe(503);
  const samples = await scrape(registry);
  // What the client got: one 200 (the first) and one 503 (the retry).
  expect(total(samples, 'idempotency_replays_total', {})).toBe(0);
  expect(total(samples, 'idempotency_requests_total', { status: '200' })).toBe(1);
  expect(total(samples, 'idempotency_requests_total', { status: '503' })).toBe(1);
});
