import { fastifyIdempotency } from '@idem/adapter-fastify';
import { newKey } from '@idem/adapter-suite';
import { createMemoryStore } from '@idem/store-memory';
import Fastify, { type FastifyInstance } from 'fastify';
import { describe, expect, test } from 'vitest';

// The plugin reads keyed JSON bodies through Fastify's own JSON parser, keeping the text it parses (no stream per
// request); an app with a JSON parser of its own keeps it, and its keyed bodies are teed. Either way the
// fingerprint sees the exact text: two bodies a parsed value cannot tell apart are two requests.

async function app(setup: (app: FastifyInstance) => Promise<void>, options: object = {}) {
  const server = Fastify(options);
  await setup(server);
  let runs = 0;
  server.post('/orders', async (request) => ({ run: ++runs, body: request.body }));
  await server.ready();
  const post = (key: string, payload: string) =>
    server.inject({
      method: 'POST',
      url: '/orders',
      headers: { 'content-type': 'application/json; charset=utf-8', 'idempotency-key': key },
      payload,
    });
  return { server, post };
}

async function withPlugin(server: FastifyInstance): Promise<void> {
  await server.register(fastifyIdempotency, { store: createMemoryStore({ sweepIntervalMs: false }) });
}

describe.each([
  ['Fastify’s JSON parser, kept by the plugin', withPlugin],
  [
    'the app’s own JSON parser, registered first (the plugin tees)',
    async (server: FastifyInstance) => {
      server.addContentTypeParser('application/json', { parseAs: 'string' }, (_request, text, done) => {
        done(null, { own: true, text });
      });
      await withPlugin(server);
    },
  ],
])('%s', (_name, setup) => {
  test('a retry replays; bodies a parsed value cannot tell apart are not the same request', async () => {
    const { server, post } = await app(setup);
    const key = newKey();
    const first = await post(key, '{"n":1e400}');
    expect(first.statusCode).toBe(200);
    const retry = await post(key, '{"n":1e400}');
    expect(retry.headers['idempotent-replayed']).toBe('true');
    expect(retry.body).toBe(first.body);
    // JSON.parse reads both as {"n": Infinity → null}; their text differs, so the key is reused: 422.
    expect((await post(key, '{"n":null}')).statusCode).toBe(422);
    expect((await post(key, '{"n":1E400}')).statusCode).toBe(422);
    await server.close();
  });
});

test('the app’s own JSON parser registered first is the one that parses', async () => {
  const { server, post } = await app(async (s) => {
    s.addContentTypeParser('application/json', { parseAs: 'string' }, (_request, text, done) => {
      done(null, { own: true, text });
    });
    await withPlugin(s);
  });
  expect((await post(newKey(), '{"a":1}')).json()).toMatchObject({ body: { own: true, text: '{"a":1}' } });
  await server.close();
});

test('the app’s poisoning settings hold for the JSON the plugin parses', async () => {
  const strict = await app(withPlugin);
  expect((await strict.post(newKey(), '{"__proto__":{"x":1}}')).statusCode).toBe(400);
  await strict.server.close();
  const lenient = await app(withPlugin, { onProtoPoisoning: 'remove' });
  const answer = await lenient.post(newKey(), '{"a":1,"__proto__":{"x":1}}');
  expect(answer.statusCode).toBe(200);
  expect(answer.json().body).toEqual({ a: 1 });
  await lenient.server.close();
});

test('an app that adds its own JSON parser after the plugin is told so by Fastify, at startup', async () => {
  const server = Fastify();
  await withPlugin(server);
  expect(() =>
    server.addContentTypeParser('application/json', (_request, _payload, done) => done(null, {})),
  ).toThrow(expect.objectContaining({ code: 'FST_ERR_CTP_ALREADY_PRESENT' }));
  await server.close();
});
