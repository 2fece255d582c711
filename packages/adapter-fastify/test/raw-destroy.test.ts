import { connect } from 'node:http2';
import { pipeline, Readable } from 'node:stream';
import { fastifyIdempotency } from '@idem/adapter-fastify';
import { postLeaving, settled } from '@idem/adapter-suite';
import { createMemoryStore } from '@idem/store-memory';
import Fastify, { type FastifyInstance, type FastifyReply } from 'fastify';
import { v7 } from 'uuid';
import { afterEach, describe, expect, test } from 'vitest';

// A handler that destroys the raw response itself (without reply.hijack()) has answered nothing: Fastify sends
// nothing after it (the socket is gone), so no answer is ever handed over. The key must not stay in flight
// under its renewed lease until maxExecutionMs (not set here: it would be renewed for ever).

let app: FastifyInstance | undefined;
afterEach(async () => {
  await app?.close();
  app = undefined;
});

const delay = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A route whose first run does `first` to the response; later runs answer 201. */
async function start(first: (reply: FastifyReply) => Promise<unknown> | unknown) {
  const store = createMemoryStore({ sweepIntervalMs: false });
  let runs = 0;
  app = Fastify();
  await app.register(fastifyIdempotency, { store });
  app.post('/orders', async (_request, reply) => {
    runs++;
    if (runs === 1) return first(reply);
    return reply.code(201).send({ id: runs });
  });
  const url = await app.listen({ port: 0, host: '127.0.0.1' });
  return { store, url, runs: () => runs };
}

describe('the handler destroys reply.raw without hijacking it, and never answers', () => {
  for (const [name, destroy] of [
    ['destroy()', (reply: FastifyReply) => reply.raw.destroy()],
    ['destroy(error)', (reply: FastifyReply) => reply.raw.destroy(new Error('given up'))],
  ] as const) {
    test(`${name}: the key is released at once, and the retry runs the handler`, async () => {
      const { store, url, runs } = await start((reply) => {
        destroy(reply);
        return undefined; // nothing more: Fastify sends nothing on a destroyed socket
      });
      const key = v7();
      expect(await postLeaving(url, key)).toBeUndefined();
      await delay(50);
      expect(await store.load({ scope: '', key })).toBeUndefined(); // released, not in flight
      const retry = await postLeaving(url, key);
      expect(retry).toMatchObject({ status: 201, replayed: undefined, body: '{"id":2}' });
      expect(runs()).toBe(2);
    });
  }

  test('the client left first, then the handler destroys reply.raw: released at once', async () => {
    const { store, url, runs } = await start(async (reply) => {
      await delay(100); // the client leaves meanwhile
      reply.raw.destroy();
    });
    const key = v7();
    await postLeaving(url, key, 30);
    await delay(150);
    expect(await store.load({ scope: '', key })).toBeUndefined();
    const retry = await postLeaving(url, key);
    expect(retry).toMatchObject({ status: 201, replayed: undefined });
    expect(runs()).toBe(2);
  });
});

test('HTTP/2: the handler destroys reply.raw and never answers: released at once', async () => {
  const store = createMemoryStore({ sweepIntervalMs: false });
  let runs = 0;
  app = Fastify({ http2: true }) as unknown as FastifyInstance;
  await app.register(fastifyIdempotency, { store });
  app.post('/orders', async (_request, reply) => {
    runs++;
    if (runs === 1) return void reply.raw.destroy();
    return reply.code(201).send({ id: runs });
  });
  const origin = await app.listen({ port: 0, host: '127.0.0.1' });
  const key = v7();
  const h2post = async () => {
    const session = connect(origin);
    session.on('error', () => {});
    try {
      const stream = session.request({
        ':method': 'POST',
        ':path': '/orders',
        'content-type': 'application/json',
        'idempotency-key': key,
      });
      stream.on('error', () => {});
      stream.end('{"item":"book"}');
      const status = await new Promise<unknown>((resolve) => {
        stream.on('response', (headers) => resolve(headers[':status']));
        stream.on('close', () => resolve(undefined));
      });
      stream.resume();
      return status;
    } finally {
      session.close();
    }
  };
  expect(await h2post()).toBeUndefined();
  await delay(50);
  expect(await store.load({ scope: '', key })).toBeUndefined();
  expect(await h2post()).toBe(201);
  expect(runs).toBe(2);
});

describe('a destroy after an answer began or ended keeps what went out', () => {
  test('after a head written on reply.raw: stored with the status, the body omitted (the work happened)', async () => {
    const { store, url, runs } = await start(async (reply) => {
      reply.raw.writeHead(201, { 'content-type': 'text/plain' });
      reply.raw.flushHeaders();
      await delay(20);
      reply.raw.destroy();
    });
    const key = v7();
    await postLeaving(url, key);
    await settled(store, key);
    const retry = await postLeaving(url, key);
    expect(retry).toMatchObject({ status: 201, replayed: 'true', omitted: 'true' });
    expect(runs()).toBe(1);
  });

  test('after the whole answer went out: stored whole', async () => {
    const { store, url, runs } = await start((reply) => {
      reply.code(201).send({ id: 1 });
      reply.raw.destroy();
      return reply;
    });
    const key = v7();
    await postLeaving(url, key);
    await settled(store, key);
    const retry = await postLeaving(url, key);
    expect(retry).toMatchObject({ status: 201, replayed: 'true', body: '{"id":1}' });
    expect(runs()).toBe(1);
  });
});

describe('the client left before any status, then the handler hijacks the reply and writes on reply.raw itself', () => {
  test('it pipes a stream in: settled at once with its status and no body', async () => {
    const { store, url, runs } = await start(async (reply) => {
      await delay(100); // the client leaves meanwhile
      reply.hijack();
      reply.raw.statusCode = 201;
      reply.raw.setHeader('content-type', 'text/plain');
      const source = Readable.from(
        (async function* () {
          await delay(50);
          yield 'streamed';
        })(),
      );
      pipeline(source, reply.raw, () => {});
    });
    const key = v7();
    await postLeaving(url, key, 30);
    await delay(150);
    expect((await store.load({ scope: '', key }))?.response).toMatchObject({
      status: 201,
      body: null,
      bodyOmitted: true,
    });
    expect(await postLeaving(url, key)).toMatchObject({ status: 201, replayed: 'true', omitted: 'true' });
    expect(runs()).toBe(1);
  });

  test('it writes its head and body at once: stored whole', async () => {
    const { store, url, runs } = await start(async (reply) => {
      await delay(100);
      reply.hijack();
      reply.raw.writeHead(201, { 'content-type': 'text/plain' });
      reply.raw.end('written');
    });
    const key = v7();
    await postLeaving(url, key, 30);
    await delay(150);
    await settled(store, key);
    expect(await postLeaving(url, key)).toMatchObject({ status: 201, replayed: 'true', body: 'written' });
    expect(runs()).toBe(1);
  });
});
