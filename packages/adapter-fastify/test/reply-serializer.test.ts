import { fastifyIdempotency } from '@idem/adapter-fastify';
import { createMemoryStore } from '@idem/store-memory';
import Fastify, { type FastifyInstance } from 'fastify';
import { v7 } from 'uuid';
import { afterEach, expect, test } from 'vitest';

// An app that sets a serializer on each reply (`reply.serializer`, in an `onRequest` hook) has every string sent
// through it. Refusals and replays are sent whole, as bytes: their JSON is not encoded a second time.

let app: FastifyInstance | undefined;
afterEach(async () => {
  await app?.close();
  app = undefined;
});

const post = (url: string, key: string, body: unknown) =>
  fetch(`${url}/orders`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': key },
    body: JSON.stringify(body),
  });

test('refusals and replays are not run through a serializer set on the reply', async () => {
  let runs = 0;
  app = Fastify();
  app.addHook('onRequest', async (_request, reply) => {
    reply.serializer((value: unknown) => JSON.stringify({ serialized: value }));
  });
  await app.register(fastifyIdempotency, { store: createMemoryStore({ sweepIntervalMs: false }) });
  app.post('/orders', async (_request, reply) => reply.code(201).send({ id: ++runs }));
  const url = await app.listen({ port: 0, host: '127.0.0.1' });

  const invalid = await post(url, 'not-a-uuid', {});
  expect(invalid.status).toBe(400);
  expect(invalid.headers.get('content-type')).toBe('application/json; charset=utf-8');
  const refusal = (await invalid.json()) as { error?: { code?: string } };
  expect(refusal.error?.code).toBe('IDEMPOTENCY_KEY_INVALID');

  const key = v7();
  const first = await post(url, key, { item: 'a' });
  const firstText = await first.text();
  expect(JSON.parse(firstText)).toEqual({ serialized: { id: 1 } }); // the app's own answer, as it serializes it
  const replay = await post(url, key, { item: 'a' });
  expect(replay.headers.get('idempotent-replayed')).toBe('true');
  expect(await replay.text()).toBe(firstText);
  const reused = await post(url, key, { item: 'b' });
  expect(reused.status).toBe(422);
  expect(((await reused.json()) as { error?: { code?: string } }).error?.code).toBe('IDEMPOTENCY_KEY_REUSED');
  expect(runs).toBe(1);
});
