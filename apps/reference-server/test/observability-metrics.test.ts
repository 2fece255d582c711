import { parseExposition, total } from '@idem/adapter-suite';
import { afterEach, describe, expect, test } from 'vitest';
import { gate, type ObservedNode, startObservedNode } from './support/observed.js';
import { call, newKey } from './support/server.js';

let node: ObservedNode | undefined;
afterEach(async () => {
  await node?.close();
  node = undefined;
});

async function scrape(url: string) {
  const response = await fetch(`${url}/metrics`);
  expect(response.status).toBe(200);
  expect(response.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
  return parseExposition(await response.text());
}

describe('GET /metrics', () => {
  // On PostgreSQL: a duplicate waits on the row its first request locked, and gives up after the wait.
  test('after a replay, a mismatch, a conflict and a store outage, each is counted', async () => {
    node = await startObservedNode({ IDEMPOTENCY_MAX_WAIT_MS: '200' }, 'postgres');
    const { url, faults } = node;
    const key = newKey();
    const create = (namespace: string, k = key) =>
      call(url, 'POST', '/v1/namespaces', { key: k, body: { namespace: [namespace] } });

    expect((await create('a')).status).toBe(200);
    const replay = await create('a');
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect((await create('b')).status).toBe(400); // the key reused for another namespace

    // A duplicate of a request still running waits, then gets the retryable 503.
    const held = gate();
    faults.hold = held.wait;
    const other = newKey();
    const first = create('c', other);
    await new Promise((resolve) => setTimeout(resolve, 50));
    const duplicate = await create('c', other);
    expect(duplicate.status).toBe(503);
    held.open();
    faults.hold = undefined;
    expect((await first).status).toBe(200);

    faults.storeDown = true;
    expect((await create('d', newKey())).status).toBe(503);
    const during = performance.now();
    const samples = await scrape(url); // the scrape itself never needs the store
    expect(performance.now() - during).toBeLessThan(1_000);

    const operation = '/v1/namespaces';
    expect(total(samples, 'idempotency_replays_total', { operation })).toBe(1);
    expect(total(samples, 'idempotency_mismatches_total', { operation })).toBe(1);
    expect(total(samples, 'idempotency_conflicts_total', { operation, waited: 'true' })).toBe(1);
    expect(total(samples, 'idempotency_store_errors_total', { store_operation: 'reserve' })).toBe(1);
    expect(total(samples, 'idempotency_errors_total', { error_type: 'store_unavailable', operation })).toBe(
      1,
    );
    const requests = (status: string) =>
      total(samples, 'idempotency_requests_total', { method: 'POST', operation, status });
    // The outage is the host's answer (its transaction failed), not a decision of the idempotency layer: it
    // counts as a store error above and as an HTTP 503 below, not here.
    expect({ ok: requests('200'), reused: requests('400'), busy: requests('503') }).toEqual({
      ok: 3,
      reused: 1,
      busy: 1,
    });
    expect(total(samples, 'idempotency_active_keys_count')).toBe(0);
    expect(total(samples, 'idempotency_processing_duration_seconds_count', { operation })).toBe(5);
    // HTTP RED per route template, and the process metrics
    const http = (status: string) =>
      total(samples, 'http_requests_total', { method: 'POST', route: '/v1/namespaces', status_code: status });
    expect([http('200'), http('400'), http('503')]).toEqual([3, 1, 2]);
    expect(total(samples, 'http_request_duration_seconds_count', { route: '/v1/namespaces' })).toBe(6);
    expect(samples.some((s) => s.name === 'process_cpu_user_seconds_total')).toBe(true);
    expect(samples.some((s) => s.name === 'nodejs_heap_size_used_bytes')).toBe(true);
  });

  test('a prefixed route is the same operation as the plain one; the route label keeps its template', async () => {
    node = await startObservedNode();
    const answer = await call(node.url, 'POST', '/v1/warehouse1/namespaces', {
      key: newKey(),
      body: { namespace: ['p'] },
    });
    expect(answer.status).toBe(200);
    const samples = await scrape(node.url);
    expect(total(samples, 'idempotency_requests_total', { operation: '/v1/namespaces', status: '200' })).toBe(
      1,
    );
    expect(total(samples, 'http_requests_total', { route: '/v1/:prefix/namespaces' })).toBe(1);
  });

  test('thousands of distinct paths stay a handful of series: unmatched paths collapse, parameters stay templates', async () => {
    node = await startObservedNode();
    const { url } = node;
    for (let i = 0; i < 300; i++) {
      await fetch(`${url}/no/such/path/${i}?x=${i}`);
      await fetch(`${url}/v1/namespaces/ns${i}`);
      await call(url, 'POST', `/v1/namespaces/ns${i}/tables`, { key: newKey(), body: { name: 't' } });
    }
    const text = await (await fetch(`${url}/metrics`)).text();
    const samples = parseExposition(text);
    expect(total(samples, 'http_requests_total', { route: 'unmatched', status_code: '404' })).toBe(300);
    expect(
      total(samples, 'http_requests_total', { route: '/v1/namespaces/:namespace', status_code: '404' }),
    ).toBe(300);
    const routes = new Set(
      samples.filter((s) => s.name === 'http_requests_total').map((s) => s.labels.route),
    );
    expect(routes.size).toBeLessThanOrEqual(4);
    expect(text).not.toMatch(/ns\d|no\/such/);
  });

  test('the server keeps answering, and /metrics keeps scraping, while the database hangs', async () => {
    node = await startObservedNode({ HEALTH_TIMEOUT_MS: '200' });
    node.faults.pingHangs = true;
    node.faults.hold = new Promise(() => {}); // catalog transactions never start
    const startedMs = performance.now();
    expect((await fetch(`${node.url}/ready`)).status).toBe(503);
    const samples = await scrape(node.url);
    expect(performance.now() - startedMs).toBeLessThan(2_000);
    expect(total(samples, 'http_requests_total', { route: '/ready', status_code: '503' })).toBe(1);
  });

  test('METRICS_ENABLED=false serves no /metrics', async () => {
    node = await startObservedNode({ METRICS_ENABLED: 'false' });
    expect((await fetch(`${node.url}/metrics`)).status).toBe(404);
  });
});
