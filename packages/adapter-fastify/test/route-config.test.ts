import { gunzipSync, gzipSync } from 'node:zlib';
import { fastifyIdempotency, sendReplay } from '@idem/adapter-fastify';
import { newKey } from '@idem/adapter-suite';
import { createMemoryStore } from '@idem/store-memory';
import Fastify from 'fastify';
import { expect, test, vi } from 'vitest';

const key = newKey();

test('per route: config.idempotency false turns it off, an object overrides the options', async () => {
  const app = Fastify();
  await app.register(fastifyIdempotency, { store: createMemoryStore({ sweepIntervalMs: false }) });
  let runs = 0;
  app.post('/plain', async () => ({ run: ++runs }));
  app.post('/off', { config: { idempotency: false } }, async () => ({ run: ++runs }));
  app.post('/tokens', { config: { idempotency: { keyFormat: 'token', required: true } } }, async () => ({
    run: ++runs,
  }));
  const post = (url: string, headers: Record<string, string> = {}) =>
    app.inject({
      method: 'POST',
      url,
      headers: { 'content-type': 'application/json', ...headers },
      payload: '{}',
    });

  await post('/plain', { 'idempotency-key': key });
  expect((await post('/plain', { 'idempotency-key': key })).headers['idempotent-replayed']).toBe('true');
  expect((await post('/off', { 'idempotency-key': 'not-even-a-uuid' })).statusCode).toBe(200);
  expect(
    (await post('/off', { 'idempotency-key': 'not-even-a-uuid' })).headers['idempotent-replayed'],
  ).toBeUndefined();
  expect((await post('/tokens')).statusCode).toBe(400);
  expect((await post('/tokens', { 'idempotency-key': 'order-1' })).statusCode).toBe(200);
  expect((await post('/tokens', { 'idempotency-key': 'order-1' })).headers['idempotent-replayed']).toBe(
    'true',
  );
  await app.close();
});

test('per route: maxBodyBytes is the route’s own at capture time, above or below the plugin’s', async () => {
  const app = Fastify();
  await app.register(fastifyIdempotency, {
    store: createMemoryStore({ sweepIntervalMs: false }),
    maxBodyBytes: 100,
  });
  const big = 'x'.repeat(1_000);
  app.post('/roomy', { config: { idempotency: { maxBodyBytes: 10_000 } } }, async () => big);
  app.post('/tight', { config: { idempotency: { maxBodyBytes: 10 } } }, async () => 'x'.repeat(50));
  const post = (url: string, k: string) =>
    app.inject({ method: 'POST', url, headers: { 'idempotency-key': k }, payload: '' });
  const roomyKey = newKey();
  await post('/roomy', roomyKey);
  const roomy = await post('/roomy', roomyKey);
  expect(roomy.headers['idempotent-replayed']).toBe('true');
  expect(roomy.body).toBe(big);
  const tightKey = newKey();
  await post('/tight', tightKey);
  const tight = await post('/tight', tightKey);
  expect(tight.headers['idempotent-replayed']).toBe('true');
  expect(tight.headers['idempotent-replay-body-omitted']).toBe('true');
  expect(tight.body).toBe('');
  await app.close();
});

test('per route: a route that waits stops waiting when its client leaves, and never runs for nobody', async () => {
  // A connection whose client left is not idle to Fastify: close it at once rather than wait for keep-alive.
  const app = Fastify({ forceCloseConnections: true });
  await app.register(fastifyIdempotency, { store: createMemoryStore({ sweepIntervalMs: false }) });
  let runs = 0;
  app.post(
    '/waits',
    { config: { idempotency: { inFlight: { strategy: 'wait', maxWaitMs: 2_000, initialPollMs: 10 } } } },
    async (_request, reply) => {
      runs++;
      await new Promise((resolve) => setTimeout(resolve, 150));
      return reply.code(500).send({ failed: true }); // released: a waiter would take the key over
    },
  );
  const url = `${await app.listen({ port: 0, host: '127.0.0.1' })}/waits`;
  const k = newKey();
  const post = (signal?: AbortSignal) =>
    fetch(url, {
      method: 'POST',
      headers: { 'idempotency-key': k, 'content-type': 'application/json' },
      body: '{}',
      ...(signal ? { signal } : {}),
    })
      .then((response) => response.arrayBuffer())
      .catch(() => undefined);
  const first = post();
  await new Promise((resolve) => setTimeout(resolve, 30));
  await post(AbortSignal.timeout(50)); // waits behind the first, then leaves
  await first;
  await new Promise((resolve) => setTimeout(resolve, 200));
  expect(runs).toBe(1);
  await app.close();
});

test('a response encoded by an onSend hook (as @fastify/compress does) is stored with its encoding', async () => {
  const app = Fastify();
  await app.register(fastifyIdempotency, { store: createMemoryStore({ sweepIntervalMs: false }) });
  app.addHook('onSend', async (_request, reply, payload) => {
    if (reply.getHeader('content-encoding') !== undefined) return payload; // a replay: already encoded
    reply.header('content-encoding', 'gzip');
    return gzipSync(String(payload));
  });
  app.post('/orders', async () => ({ ok: true }));
  const k = newKey();
  const post = () =>
    app.inject({ method: 'POST', url: '/orders', headers: { 'idempotency-key': k }, payload: '' });
  const first = await post();
  const retry = await post();
  expect(retry.headers['idempotent-replayed']).toBe('true');
  expect(retry.headers['content-encoding']).toBe('gzip');
  expect(gunzipSync(retry.rawPayload).toString()).toBe(gunzipSync(first.rawPayload).toString());
  await app.close();
});

test('per route: overriding routes share the plugin’s heartbeat, however many there are', async () => {
  const intervals = vi.spyOn(globalThis, 'setInterval');
  try {
    const app = Fastify();
    await app.register(fastifyIdempotency, {
      store: createMemoryStore({ sweepIntervalMs: false }),
      heartbeatIntervalMs: 60_000,
    });
    const routes = ['/a', '/b', '/c'];
    for (const url of routes) {
      app.post(url, { config: { idempotency: { required: true } } }, async () => ({ url }));
    }
    for (const url of routes) {
      const response = await app.inject({ method: 'POST', url, headers: { 'idempotency-key': newKey() } });
      expect(response.statusCode).toBe(200);
    }
    // One timer for the executions of every route (a coordinator per route had one each).
    expect(intervals.mock.calls.filter(([, ms]) => ms === 30_000)).toHaveLength(1);
    await app.close();
  } finally {
    intervals.mockRestore();
  }
});

test('reserveIn transaction: the handler gets a transactional execution, and its answer settles the key', async () => {
  const store = createMemoryStore({ sweepIntervalMs: false });
  const app = Fastify();
  await app.register(fastifyIdempotency, { store, reserveIn: 'transaction' });
  let runs = 0;
  app.post('/orders', async (request, reply) => {
    const execution = request.idempotency;
    if (execution?.lifecycle !== 'transactional') throw new Error('not transactional');
    // The memory store has no transactions: its own calls stand in for one that commits.
    const reservation = await execution.reserveWith(store);
    if (reservation.action === 'replay') return sendReplay(reply, reservation.response);
    if (reservation.action !== 'execute') throw new Error(reservation.action);
    runs++;
    return { id: runs };
  });
  const key = newKey();
  const post = () => app.inject({ method: 'POST', url: '/orders', headers: { 'idempotency-key': key } });
  expect((await post()).json()).toEqual({ id: 1 });
  const retry = await post();
  expect(retry.json()).toEqual({ id: 1 });
  expect(retry.headers['idempotent-replayed']).toBe('true');
  expect(runs).toBe(1);
  await app.close();
});
