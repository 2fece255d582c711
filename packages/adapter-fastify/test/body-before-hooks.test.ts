import { fastifyIdempotency } from '@idem/adapter-fastify';
import { createMemoryStore } from '@idem/store-memory';
import Fastify, { type FastifyInstance } from 'fastify';
import { v7 } from 'uuid';
import { afterEach, describe, expect, test } from 'vitest';

// The plugin takes a keyed body's bytes where its stream receives them. Over a real socket a small body
// arrives with the headers, so an async onRequest hook (authentication, say) leaves it already buffered
// when the plugin's preParsing hook runs: those bytes are read out, kept and put back for the parser.

let app: FastifyInstance | undefined;
afterEach(async () => {
  await app?.close();
  app = undefined;
});

async function server(): Promise<{ url: string; runs: () => number }> {
  let runs = 0;
  app = Fastify();
  app.addHook('onRequest', async () => {
    await new Promise((resolve) => setTimeout(resolve, 5)); // the body arrives meanwhile
  });
  await app.register(fastifyIdempotency, { store: createMemoryStore({ sweepIntervalMs: false }) });
  app.post('/orders', async (request, reply) => {
    runs++;
    return reply.code(201).send({ run: runs, got: request.body });
  });
  const url = await app.listen({ port: 0, host: '127.0.0.1' });
  return { url, runs: () => runs };
}

const post = async (url: string, key: string, body: string) => {
  const response = await fetch(`${url}/orders`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': key },
    body,
  });
  return {
    status: response.status,
    body: await response.text(),
    replayed: response.headers.get('idempotent-replayed'),
  };
};

describe('a body that arrived before the plugin saw its stream', () => {
  test('is parsed whole, replayed for the same bytes, and refused under the key for other bytes', async () => {
    const { url, runs } = await server();
    const key = v7();
    const first = await post(url, key, '{"item":"book","n":1}');
    expect(first).toMatchObject({ status: 201, replayed: null });
    expect(JSON.parse(first.body)).toEqual({ run: 1, got: { item: 'book', n: 1 } });
    expect(await post(url, key, '{ "n": 1, "item": "book" }')).toEqual({ ...first, replayed: 'true' });
    expect((await post(url, key, '{"item":"book","n":2}')).status).toBe(422);
    expect(runs()).toBe(1);
  });

  test('a large body, partly buffered and partly still arriving, is kept whole', async () => {
    const { url, runs } = await server();
    const key = v7();
    const big = JSON.stringify({ item: 'x'.repeat(200_000) });
    const first = await post(url, key, big);
    expect(first.status).toBe(201);
    expect(JSON.parse(first.body).got.item).toHaveLength(200_000);
    expect((await post(url, key, big)).replayed).toBe('true');
    expect((await post(url, key, JSON.stringify({ item: `${'x'.repeat(199_999)}y` }))).status).toBe(422);
    expect(runs()).toBe(1);
  });
});
