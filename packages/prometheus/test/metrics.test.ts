import { total } from '@idem/adapter-suite';
import {
  createIdempotency,
  type IdempotencyStore,
  type IdempotentRequest,
  IdemStoreLimitError,
  type MaybePromise,
  type TransactionalStore,
} from '@idem/core';
import { createIdempotencyMetrics } from '@idem/prometheus';
import { createMemoryStore } from '@idem/store-memory';
import { Registry } from 'prom-client';
import { v7 } from 'uuid';
import { describe, expect, test } from 'vitest';
import { scrape } from './support/scrape.js';

const KEY = v7();
const OTHER_KEY = v7();
const ROUTE = '/v1/orders/:id';

const post = (overrides: Partial<IdempotentRequest> = {}): IdempotentRequest => ({
  method: 'POST',
  route: ROUTE,
  path: '/v1/orders/42',
  body: { item: 'book' },
  key: KEY,
  scope: 'alice',
  ...overrides,
});
const created = { status: 201, headers: { 'content-type': 'application/json' }, body: '{"id":42}' };

/** The host's transaction, where the record is written (finalize answers `true`); nothing else is called. */
const committing: TransactionalStore = {
  reserve: () => Promise.reject(new Error('not reserved in the transaction')),
  finalize: () => true,
  release: () => true,
};

/** A store whose calls fail while `down` is set: an outage. */
function outageable(store: IdempotencyStore) {
  const state = { down: false };
  const guard =
    <A extends unknown[], R>(call: (...args: A) => MaybePromise<R>) =>
    async (...args: A): Promise<R> => {
      if (state.down) throw new Error('connection refused');
      return call(...args);
    };
  const wrapped: IdempotencyStore = {
    reserve: guard((p) => store.reserve(p)),
    load: guard((p) => store.load(p)),
    finalize: guard((p) => store.finalize(p)),
    release: guard((p) => store.release(p)),
    renewLease: guard((p) => store.renewLease(p)),
    purgeExpired: guard((p) => store.purgeExpired(p)),
  };
  return { store: wrapped, state };
}

function setup(options: Parameters<typeof createIdempotencyMetrics>[0] = {}) {
  const registry = new Registry();
  const metrics = createIdempotencyMetrics({ registry, ...options });
  const memory = createMemoryStore({ sweepIntervalMs: false });
  const { store, state } = outageable(memory);
  const idem = createIdempotency({ store, heartbeatIntervalMs: false, onEvent: [metrics.onEvent] });
  return { registry, metrics, idem, state };
}

describe('@idem/prometheus on a real registry, read back from the scraped text', () => {
  test('a replay, a mismatch, a conflict and a store outage are each counted, with their answer status', async () => {
    const { registry, idem, state } = setup();
    const first = await idem.begin(post());
    if (first.action !== 'execute') throw new Error(first.action);
    expect((await idem.begin(post())).action).toBe('reject'); // in flight: a conflict
    await first.execution.finish(created);
    expect((await idem.begin(post())).action).toBe('replay');
    expect((await idem.begin(post({ body: { item: 'pen' } }))).action).toBe('reject'); // mismatch
    state.down = true;
    expect((await idem.begin(post({ key: OTHER_KEY }))).action).toBe('reject'); // 503

    const samples = await scrape(registry);
    const operation = ROUTE;
    expect(total(samples, 'idempotency_replays_total', { operation })).toBe(1);
    expect(total(samples, 'idempotency_mismatches_total', { operation })).toBe(1);
    expect(total(samples, 'idempotency_conflicts_total', { operation, waited: 'false' })).toBe(1);
    expect(total(samples, 'idempotency_store_errors_total', { store_operation: 'reserve' })).toBe(1);
    expect(total(samples, 'idempotency_errors_total', { error_type: 'store_unavailable', operation })).toBe(
      1,
    );
    const requests = (status: string) =>
      total(samples, 'idempotency_requests_total', { method: 'POST', operation, status });
    expect([requests('201'), requests('409'), requests('422'), requests('503')]).toEqual([2, 1, 1, 1]);
    expect(total(samples, 'idempotency_processing_duration_seconds_count', { operation })).toBe(5);
    expect(total(samples, 'idempotency_active_keys_count')).toBe(0);
  });

  test('active keys: up while an execution runs, down once it ends, whichever way it ends', async () => {
    const { registry, idem } = setup();
    const executions = [];
    for (const key of [KEY, OTHER_KEY]) {
      const result = await idem.begin(post({ key }));
      if (result.action !== 'execute') throw new Error(result.action);
      executions.push(result.execution);
    }
    expect(total(await scrape(registry), 'idempotency_active_keys_count', { operation: ROUTE })).toBe(2);
    await executions[0]?.finish(created);
    await executions[1]?.abort();
    const samples = await scrape(registry);
    expect(total(samples, 'idempotency_active_keys_count')).toBe(0);
    expect(total(samples, 'idempotency_requests_total', { status: '201' })).toBe(1);
    expect(total(samples, 'idempotency_requests_total', { status: 'none' })).toBe(1);
  });

  test('an execution that finalized in its transaction, then answered otherwise, is counted once', async () => {
    const { registry, idem } = setup();
    const result = await idem.begin(post());
    if (result.action !== 'execute') throw new Error(result.action);
    await result.execution.finalizeWith(created, committing);
    await result.execution.finish({ status: 503, headers: {}, body: null }); // the commit failed after all
    const samples = await scrape(registry);
    expect(total(samples, 'idempotency_requests_total')).toBe(1);
    expect(total(samples, 'idempotency_active_keys_count')).toBe(0);
  });

  test('a store outage at finalize ends the execution (no stuck active key) and counts a store error', async () => {
    const { registry, idem, state } = setup();
    const result = await idem.begin(post());
    if (result.action !== 'execute') throw new Error(result.action);
    state.down = true;
    expect(await result.execution.finish(created)).toBe('store-error');
    const samples = await scrape(registry);
    expect(total(samples, 'idempotency_active_keys_count')).toBe(0);
    expect(total(samples, 'idempotency_store_errors_total', { store_operation: 'finalize' })).toBe(1);
    expect(total(samples, 'idempotency_requests_total', { status: 'none' })).toBe(1);
  });

  test('lease takeovers and losses, hook errors, purges, evictions and cache hits and misses', async () => {
    const registry = new Registry();
    const metrics = createIdempotencyMetrics({ registry });
    let nowMs = 1_000_000;
    const store = createMemoryStore({ sweepIntervalMs: false, onEvent: metrics.onEvent });
    const idem = createIdempotency({
      store,
      clock: { nowMs: () => nowMs },
      leaseMs: 1_000,
      heartbeatIntervalMs: false,
      redact: () => {
        throw new Error('broken redact');
      },
      onEvent: metrics.onEvent,
    });
    const first = await idem.begin(post());
    if (first.action !== 'execute') throw new Error(first.action);
    nowMs += 5_000; // the first request's lease lapses: the retry takes over
    const second = await idem.begin(post());
    if (second.action !== 'execute') throw new Error(second.action);
    expect(await first.execution.finish(created)).toBe('lease-lost');
    await second.execution.finish(created);
    metrics.onEvent({ type: 'purged', count: 7, batches: 1, durationMs: 3 });
    metrics.onEvent({ type: 'cache', outcome: 'hit', operation: 'reserve', scope: 's', key: 'k' });
    metrics.onEvent({ type: 'cache', outcome: 'miss', operation: 'load', scope: 's', key: 'k' });
    metrics.onEvent({ type: 'evicted', scope: 's', key: 'k', reason: 'capacity' });

    const samples = await scrape(registry);
    expect(total(samples, 'idempotency_lease_takeovers_total', { operation: ROUTE })).toBe(1);
    expect(total(samples, 'idempotency_lease_losses_total', { phase: 'finalize' })).toBe(1);
    expect(total(samples, 'idempotency_errors_total', { error_type: 'lease_lost' })).toBe(1);
    expect(total(samples, 'idempotency_errors_total', { error_type: 'hook_error' })).toBe(2);
    expect(total(samples, 'idempotency_purged_records_total')).toBe(7);
    expect(total(samples, 'idempotency_evicted_records_total')).toBe(1);
    expect(total(samples, 'idempotency_cache_hits_total', { operation: 'reserve' })).toBe(1);
    expect(total(samples, 'idempotency_cache_misses_total', { operation: 'load' })).toBe(1);
    expect(total(samples, 'idempotency_active_keys_count')).toBe(0);
    await store.close();
  });
});

describe('@idem/prometheus: each execution counted once, as it durably ended', () => {
  test('one lost lease, found by the heartbeat and again by the finalize, is one loss and one error', () => {
    const registry = new Registry();
    const metrics = createIdempotencyMetrics({ registry });
    const base = { scope: 's', key: 'k', method: 'POST', route: ROUTE, owner: 'o1', durationMs: 1 };
    metrics.onEvent({ type: 'reserved', ...base, tookOver: false, elapsedMs: 1 });
    metrics.onEvent({ type: 'lease-lost', ...base, phase: 'heartbeat', executionMs: 5 });
    metrics.onEvent({ type: 'lease-lost', ...base, phase: 'finalize', status: 201, executionMs: 9 });
    return scrape(registry).then((samples) => {
      expect(total(samples, 'idempotency_lease_losses_total')).toBe(1);
      expect(total(samples, 'idempotency_lease_losses_total', { phase: 'heartbeat' })).toBe(1);
      expect(total(samples, 'idempotency_errors_total', { error_type: 'lease_lost' })).toBe(1);
      expect(total(samples, 'idempotency_requests_total')).toBe(1);
      expect(total(samples, 'idempotency_active_keys_count')).toBe(0);
    });
  });

  test('through the coordinator: a heartbeat that finds the key taken, then the finalize, count one loss', async () => {
    const registry = new Registry();
    const metrics = createIdempotencyMetrics({ registry });
    let nowMs = 1_000_000;
    const store = createMemoryStore({ sweepIntervalMs: false });
    const idem = createIdempotency({
      store,
      clock: { nowMs: () => nowMs },
      leaseMs: 1_000,
      heartbeatIntervalMs: 20,
      onEvent: metrics.onEvent,
    });
    const first = await idem.begin(post());
    if (first.action !== 'execute') throw new Error(first.action);
    // The first request stalls past its lease: another node's retry takes it over, then its heartbeat sees.
    nowMs += 5_000;
    const second = await idem.begin(post());
    if (second.action !== 'execute') throw new Error(second.action);
    await new Promise<void>((resolve) => first.execution.signal.addEventListener('abort', () => resolve()));
    expect(await first.execution.finish(created)).toBe('lease-lost');
    await second.execution.finish(created);
    const samples = await scrape(registry);
    expect(total(samples, 'idempotency_lease_losses_total')).toBe(1);
    expect(total(samples, 'idempotency_errors_total', { error_type: 'lease_lost' })).toBe(1);
    await store.close();
  });

  test('a transactional finalize whose commit failed counts the 503 that went out, not the 200', async () => {
    const registry = new Registry();
    const metrics = createIdempotencyMetrics({ registry });
    const store = createMemoryStore({ sweepIntervalMs: false });
    const idem = createIdempotency({ store, heartbeatIntervalMs: false, onEvent: metrics.onEvent });
    const result = await idem.begin(post());
    if (result.action !== 'execute') throw new Error(result.action);
    await result.execution.finalizeWith({ ...created, status: 200 }, committing); // then the COMMIT fails
    await result.execution.finish({ status: 503, headers: {}, body: null });
    const samples = await scrape(registry);
    expect(total(samples, 'idempotency_requests_total', { status: '503' })).toBe(1);
    expect(total(samples, 'idempotency_requests_total', { status: '200' })).toBe(0);
    await store.close();
  });

  test('a response kept without the headers the store could not hold: one store_limit error, the 201 counted', async () => {
    const registry = new Registry();
    const metrics = createIdempotencyMetrics({ registry });
    const store = createMemoryStore({ sweepIntervalMs: false });
    const limited: IdempotencyStore = {
      ...store,
      reserve: (p) => store.reserve(p),
      load: (p) => store.load(p),
      release: (p) => store.release(p),
      renewLease: (p) => store.renewLease(p),
      purgeExpired: (p) => store.purgeExpired(p),
      async finalize(params) {
        if (params.response.headers.link !== undefined) throw new IdemStoreLimitError('headers too large');
        return store.finalize(params);
      },
    };
    const idem = createIdempotency({
      store: limited,
      heartbeatIntervalMs: false,
      replayHeaders: ['content-type', 'link'],
      onEvent: metrics.onEvent,
    });
    const result = await idem.begin(post());
    if (result.action !== 'execute') throw new Error(result.action);
    const answer = { ...created, headers: { ...created.headers, link: '<x>' } };
    expect(await result.execution.finish(answer)).toBe('finalized');
    const samples = await scrape(registry);
    expect(total(samples, 'idempotency_errors_total', { error_type: 'store_limit' })).toBe(1);
    expect(total(samples, 'idempotency_requests_total', { status: '201' })).toBe(1);
    await store.close();
  });
});

describe('@idem/prometheus: labels stay bounded and clean', () => {
  test('thousands of distinct routes collapse into `other` past maxOperations', async () => {
    const { registry, idem } = setup({ maxOperations: 10 });
    for (let i = 0; i < 2_000; i++) {
      const route = `/raw/${i}`; // a host that (wrongly) passes raw paths as routes
      await idem.begin(post({ route, path: route, key: v7() }));
    }
    const samples = await scrape(registry);
    const operations = new Set(
      samples.filter((s) => s.name === 'idempotency_active_keys_count').map((s) => s.labels.operation),
    );
    expect(operations.size).toBe(11);
    expect(operations.has('other')).toBe(true);
    expect(total(samples, 'idempotency_active_keys_count')).toBe(2_000);
    expect((await registry.metrics()).split('\n').length).toBeLessThan(1_000);
  });

  test('keys, scopes and paths never appear; control characters in a route are replaced', async () => {
    const { registry, idem } = setup();
    const route = '/v1/evil\n{injected="1"} 99\r\u0000';
    const result = await idem.begin(post({ route, scope: 'secret-principal' }));
    if (result.action !== 'execute') throw new Error(result.action);
    await result.execution.finish(created);
    const text = await registry.metrics();
    expect(text).not.toContain(KEY);
    expect(text).not.toContain('secret-principal');
    expect(text).not.toContain('/v1/orders/42');
    expect(text.includes('\r') || text.includes('\u0000')).toBe(false);
    expect(text).not.toMatch(/^\{injected/m);
    const samples = await scrape(registry); // every line still parses
    expect(total(samples, 'idempotency_requests_total', { operation: '/v1/evil?{injected="1"} 99??' })).toBe(
      1,
    );
  });

  test('an operation function names operations; if it throws, the route template is used', async () => {
    const { registry, idem } = setup({
      operation: ({ method, route }) => {
        if (route === '/boom') throw new Error('boom');
        return `${method.toLowerCase()}Order`;
      },
    });
    await idem.begin(post());
    await idem.begin(post({ route: '/boom', key: OTHER_KEY }));
    const samples = await scrape(registry);
    expect(total(samples, 'idempotency_active_keys_count', { operation: 'postOrder' })).toBe(1);
    expect(total(samples, 'idempotency_active_keys_count', { operation: '/boom' })).toBe(1);
  });

  test('an operation is asked once per method and route; one that failed is asked again, not its fallback kept', async () => {
    let calls = 0;
    let failing = true;
    const { registry, idem } = setup({
      operation: () => {
        calls++;
        if (failing) throw new Error('not ready');
        return 'createOrder';
      },
    });
    await idem.begin(post());
    failing = false;
    for (let i = 0; i < 3; i++) await idem.begin(post({ key: v7() }));
    const samples = await scrape(registry);
    expect(total(samples, 'idempotency_active_keys_count', { operation: ROUTE })).toBe(1);
    expect(total(samples, 'idempotency_active_keys_count', { operation: 'createOrder' })).toBe(3);
    expect(calls).toBe(2);
  });

  test('executions that never end are forgotten past maxTracked: the gauge stays bounded', async () => {
    const { registry, idem } = setup({ maxTracked: 5 });
    for (let i = 0; i < 20; i++) {
      await idem.begin(post({ key: v7() }));
    }
    expect(total(await scrape(registry), 'idempotency_active_keys_count')).toBe(5);
  });
});

describe('@idem/prometheus: registration', () => {
  test('series are registered on the registry given; remove() takes them all off', async () => {
    const registry = new Registry();
    const metrics = createIdempotencyMetrics({ registry });
    expect(registry.getSingleMetric('idempotency_requests_total')).toBeDefined();
    expect(() => createIdempotencyMetrics({ registry })).toThrow(/already been registered/);
    metrics.remove();
    expect(await registry.metrics()).toBe('\n');
    createIdempotencyMetrics({ registry }).remove(); // registered afresh after remove()
  });

  test('every series and label the README lists is exposed, the duration in seconds', async () => {
    const registry = new Registry();
    createIdempotencyMetrics({ registry });
    const text = await registry.metrics();
    for (const line of [
      '# TYPE idempotency_requests_total counter',
      '# TYPE idempotency_errors_total counter',
      '# TYPE idempotency_processing_duration_seconds histogram',
      '# TYPE idempotency_cache_hits_total counter',
      '# TYPE idempotency_cache_misses_total counter',
      '# TYPE idempotency_active_keys_count gauge',
    ]) {
      expect(text).toContain(line);
    }
    const json = await registry.getMetricsAsJSON();
    const labelsOf = (name: string) =>
      (registry.getSingleMetric(name) as unknown as { labelNames: string[] }).labelNames;
    expect(json.length).toBe(14);
    expect(labelsOf('idempotency_requests_total')).toEqual(['method', 'status', 'operation']);
    expect(labelsOf('idempotency_errors_total')).toEqual(['error_type', 'operation']);
    expect(labelsOf('idempotency_processing_duration_seconds')).toEqual(['operation', 'status']);
  });

  test('the listener is cheap: 100 000 events in well under a second', () => {
    const metrics = createIdempotencyMetrics({ registry: new Registry() });
    const startedMs = performance.now();
    for (let i = 0; i < 50_000; i++) {
      const owner = String(i);
      const base = { scope: 's', key: 'k', method: 'POST', route: ROUTE, durationMs: 1, owner };
      metrics.onEvent({ type: 'reserved', ...base, tookOver: false, elapsedMs: 2 });
      metrics.onEvent({ type: 'finalized', ...base, status: 201, external: false, executionMs: 5 });
    }
    expect(performance.now() - startedMs).toBeLessThan(1_000);
  });
});
