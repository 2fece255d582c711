import { idempotency } from '@idem/adapter-fastify';
import { createMemoryStore } from '@idem/store-memory';
import Fastify from 'fastify';
import { expect, test } from 'vitest';

const key = '0190b7e2-5a5d-7c3e-8f00-1234567890ab';

test('per route: config.idempotency false turns it off, an object overrides the options', async () => {
  const app = Fastify();
  await app.register(idempotency, { store: createMemoryStore({ sweepIntervalMs: false }) });
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
