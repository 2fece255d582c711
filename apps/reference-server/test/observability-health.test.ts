import { afterEach, describe, expect, test } from 'vitest';
import { type ObservedNode, startObservedNode } from './support/observed.js';

let node: ObservedNode | undefined;
afterEach(async () => {
  await node?.close();
  node = undefined;
});

async function get(path: string, headers: Record<string, string> = {}) {
  const response = await fetch(`${node?.url}${path}`, { headers });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

describe('health, readiness and liveness (their JSON shapes)', () => {
  test('all up: /health, /ready and /live answer 200 with their JSON', async () => {
    node = await startObservedNode();
    const health = await get('/health');
    expect(health.status).toBe(200);
    expect(health.body).toEqual({
      status: 'healthy',
      timestamp: expect.stringMatching(ISO),
      components: { database: 'healthy', idempotency_service: 'healthy' },
      // Where the records live and how a key is fenced; never a URL.
      idempotency: { store: 'sql', database: 'catalog', fence: 'transaction' },
    });
    const ready = await get('/ready');
    expect(ready.status).toBe(200);
    expect(ready.body).toEqual({
      status: 'ready',
      timestamp: expect.stringMatching(ISO),
      dependencies: { database: 'connected' },
    });
    expect(await get('/live')).toEqual({
      status: 200,
      body: { status: 'alive', timestamp: expect.stringMatching(ISO) },
    });
    expect(await get('/healthz')).toEqual({ status: 200, body: { status: 'ok' } });
    expect(await get('/readyz')).toEqual({ status: 200, body: { status: 'ready' } });
  });

  test('database unreachable: /ready, /health and /readyz answer 503; /live stays 200', async () => {
    node = await startObservedNode();
    node.faults.pingFails = true;
    const ready = await get('/ready');
    expect(ready).toMatchObject({
      status: 503,
      body: { status: 'not_ready', dependencies: { database: 'disconnected' } },
    });
    expect(await get('/health')).toMatchObject({
      status: 503,
      body: { status: 'unhealthy', components: { database: 'unhealthy', idempotency_service: 'unhealthy' } },
    });
    expect(await get('/readyz')).toEqual({ status: 503, body: { status: 'database unreachable' } });
    expect((await get('/live')).status).toBe(200);
    expect((await get('/healthz')).status).toBe(200);
    node.faults.pingFails = false;
    expect((await get('/ready')).status).toBe(200);
  });

  test('a hung database: probes answer 503 within the bound, and share one check instead of piling up', async () => {
    node = await startObservedNode({ HEALTH_TIMEOUT_MS: '300' });
    node.faults.pingHangs = true;
    const startedMs = performance.now();
    const answers = await Promise.all(
      Array.from({ length: 20 }, (_, i) => get(i % 2 ? '/ready' : '/readyz')),
    );
    expect(performance.now() - startedMs).toBeLessThan(2_000);
    expect(answers.every((answer) => answer.status === 503)).toBe(true);
    expect(node.faults.pings).toBe(1);
    expect((await get('/health')).status).toBe(503);
    expect(node.faults.pings).toBe(1); // still the same check: the database has not answered it
  });

  test('idempotency turned off: the component says so', async () => {
    node = await startObservedNode({ IDEMPOTENCY_ENABLED: 'false' });
    expect((await get('/health')).body).toMatchObject({
      status: 'healthy',
      components: { database: 'healthy', idempotency_service: 'disabled' },
    });
  });

  test('idempotency turned off: no store is opened, so one that is not there is not reported either', async () => {
    node = await startObservedNode({
      IDEMPOTENCY_ENABLED: 'false',
      IDEMPOTENCY_STORE: 'redis',
      IDEMPOTENCY_STORE_URL: 'redis://127.0.0.1:1',
    });
    const health = await get('/health');
    expect(health.status).toBe(200);
    expect(health.body.components).toEqual({ database: 'healthy', idempotency_service: 'disabled' });
    expect(health.body).not.toHaveProperty('idempotency');
  });

  test('with bearer tokens, probes and /metrics answer without one; the catalog does not', async () => {
    node = await startObservedNode({ AUTH_TOKENS: 'secret-token=alice' });
    for (const path of [
      '/health',
      '/ready',
      '/live',
      '/healthz',
      '/readyz',
      '/metrics',
      '/ready?verbose=1',
    ]) {
      expect((await fetch(`${node.url}${path}`)).status, path).toBe(200);
    }
    expect((await fetch(`${node.url}/v1/config`)).status).toBe(401);
    expect((await fetch(`${node.url}/healthzz`)).status).toBe(401);
  });
});
