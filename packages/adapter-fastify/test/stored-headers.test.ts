import { fastifyIdempotency } from '@idem/adapter-fastify';
import type { IdempotencyEvent } from '@idem/core';
import { createMemoryStore } from '@idem/store-memory';
import Fastify, { type FastifyInstance } from 'fastify';
import { v7 } from 'uuid';
import { afterEach, expect, test } from 'vitest';

// The answer's headers are read by name, from the reply (which holds those Fastify hands straight to
// `writeHead`) and from the response (those set on `reply.raw`): exactly the allow-listed ones are stored,
// whichever way they were set and in whatever case, and no other.

let app: FastifyInstance | undefined;
afterEach(async () => {
  await app?.close();
  app = undefined;
});

const post = (url: string, key: string) =>
  fetch(`${url}/orders`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': key },
    body: '{"item":"a"}',
  });

test('the allow-listed headers set on the reply and on the response are stored and replayed, no others', async () => {
  let runs = 0;
  const finalized: Extract<IdempotencyEvent, { type: 'finalized' }>[] = [];
  const store = createMemoryStore({ sweepIntervalMs: false });
  app = Fastify();
  await app.register(fastifyIdempotency, {
    store,
    replayHeaders: ['Content-Type', 'Location', 'X-Order-Total', 'x-raw-only', 'x-absent'],
    onEvent: (event) => {
      if (event.type === 'finalized') finalized.push(event);
    },
  });
  app.post('/orders', async (_request, reply) => {
    runs++;
    reply.raw.setHeader('X-Raw-Only', ['a', 'b']);
    reply.raw.setHeader('x-not-listed-raw', 'no');
    return reply
      .code(201)
      .header('location', '/orders/1')
      .header('X-Order-Total', 12)
      .header('x-not-listed', 'no')
      .header('set-cookie', 'session=secret')
      .send({ id: runs });
  });
  const url = await app.listen({ port: 0, host: '127.0.0.1' });

  const key = v7();
  const first = await post(url, key);
  expect(first.status).toBe(201);
  expect(first.headers.get('x-not-listed')).toBe('no');
  const record = await store.load({ scope: '', key });
  expect(record?.response?.headers).toEqual({
    'content-type': 'application/json; charset=utf-8',
    location: '/orders/1',
    'x-order-total': '12',
    'x-raw-only': 'a, b',
  });
  expect(finalized).toHaveLength(1);

  const replay = await post(url, key);
  expect(replay.status).toBe(201);
  expect(replay.headers.get('idempotent-replayed')).toBe('true');
  expect(replay.headers.get('location')).toBe('/orders/1');
  expect(replay.headers.get('x-order-total')).toBe('12');
  expect(replay.headers.get('x-raw-only')).toBe('a, b');
  for (const absent of ['x-not-listed', 'x-not-listed-raw', 'set-cookie', 'x-absent']) {
    expect(replay.headers.get(absent)).toBeNull();
  }
  expect(await replay.json()).toEqual({ id: 1 });
  expect(runs).toBe(1);
});
