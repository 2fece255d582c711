import { request as httpRequest } from 'node:http';
import { PassThrough, Readable } from 'node:stream';
import { createGzip } from 'node:zlib';
import { fastifyIdempotency } from '@idem/adapter-fastify';
import { createMemoryStore } from '@idem/store-memory';
import Fastify, { type FastifyReply } from 'fastify';
import { v7 } from 'uuid';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';

// Review of the response side on Fastify 5: what the first client got is what every retry gets.

const SCOPE = 's';
const store = createMemoryStore({ sweepIntervalMs: false });
const app = Fastify();
const runs = new Map<string, number>();
let url: string;
let port: number;

const slug = (name: string) => name.replace(/[^a-z0-9]+/gi, '-');
const delay = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const routes: Record<string, (reply: FastifyReply) => unknown> = {
  string: (reply) => reply.code(201).send('a string'),
  buffer: (reply) => reply.code(201).send(Buffer.from([0, 1, 2, 255])),
  object: (reply) => reply.code(201).send({ a: 1, b: [true, null] }),
  null: (reply) => reply.code(201).send(null),
  undefined: (reply) => reply.code(201).send(),
  // (a 204 sent with a body: see review-handover.test.ts)
  stream: (reply) =>
    reply
      .code(201)
      .type('text/plain')
      .send(Readable.from(['a ', 'stream'])),
  'empty string': (reply) => reply.code(201).type('text/plain').send(''),
  'typed array': (reply) => reply.code(201).send(new Uint16Array([1, 2, 3])),
  'headers set on raw': (reply) => {
    reply.raw.setHeader('etag', '"raw"');
    return reply.code(201).send('raw header');
  },
  'raw writeHead then send': (reply) => {
    reply.raw.writeHead(201, { 'content-type': 'text/plain', etag: '"w"' });
    reply.raw.end('written raw');
    return reply;
  },
  '409 deterministic error': (reply) => reply.code(409).send({ error: 'conflict' }),
};

beforeAll(async () => {
  await app.register(fastifyIdempotency, { store, scope: () => SCOPE });
  for (const [name, handler] of Object.entries(routes)) {
    app.post(`/r/${slug(name)}`, async (request, reply) => {
      const key = String(request.headers['idempotency-key']);
      runs.set(key, (runs.get(key) ?? 0) + 1);
      return handler(reply);
    });
  }
  app.post('/throws', async (request) => {
    const key = String(request.headers['idempotency-key']);
    runs.set(key, (runs.get(key) ?? 0) + 1);
    throw new Error('boom');
  });
  app.post('/500', async (request, reply) => {
    const key = String(request.headers['idempotency-key']);
    runs.set(key, (runs.get(key) ?? 0) + 1);
    return reply.code(500).send({ failed: true });
  });
  app.post('/slow', async (request, reply) => {
    const key = String(request.headers['idempotency-key']);
    runs.set(key, (runs.get(key) ?? 0) + 1);
    await delay(100);
    return reply.code(201).send({ late: true });
  });
  app.post('/trailer', async (request, reply) => {
    const key = String(request.headers['idempotency-key']);
    runs.set(key, (runs.get(key) ?? 0) + 1);
    reply.trailer('x-sum', async () => 'abc');
    return reply.code(201).type('text/plain').send('with trailer');
  });
  app.register(async (child) => {
    // A compression layer in the app: the whole payload becomes a gzip stream (as @fastify/compress does).
    child.addHook('onSend', async (request, reply, payload) => {
      if (reply.getHeader('content-encoding') !== undefined || typeof payload !== 'string') return payload;
      if (!String(request.headers['accept-encoding'] ?? '').includes('gzip')) return payload;
      reply.header('content-encoding', 'gzip');
      reply.removeHeader('content-length');
      const gzip = createGzip();
      gzip.end(payload);
      return gzip.pipe(new PassThrough());
    });
    child.post('/gz', async (request, reply) => {
      const key = String(request.headers['idempotency-key']);
      runs.set(key, (runs.get(key) ?? 0) + 1);
      return reply.code(201).send({ compressed: 'x'.repeat(500) });
    });
  });
  url = await app.listen({ port: 0, host: '127.0.0.1' });
  port = Number(new URL(url).port);
});
afterAll(() => app.close());

async function post(path: string, key: string, headers: Record<string, string> = {}) {
  const response = await fetch(`${url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': key, ...headers },
    body: '{"x":1}',
  });
  const bytes = Buffer.from(await response.arrayBuffer());
  return {
    status: response.status,
    type: response.headers.get('content-type'),
    etag: response.headers.get('etag'),
    bytes: bytes.toString('base64'),
    replayed: response.headers.get('idempotent-replayed'),
  };
}

describe('every answer replays as it went out, the handler once', () => {
  for (const name of Object.keys(routes)) {
    test(name, async () => {
      const key = v7();
      const first = await post(`/r/${slug(name)}`, key);
      await delay(20);
      const retry = await post(`/r/${slug(name)}`, key);
      expect(retry).toEqual({ ...first, replayed: 'true' });
      expect(runs.get(key)).toBe(1);
    });
  }
});

describe('answers that release the key', () => {
  test('a handler that throws: 500, released, the retry runs again', async () => {
    const key = v7();
    expect((await post('/throws', key)).status).toBe(500);
    await delay(20);
    expect((await post('/throws', key)).replayed).toBeNull();
    expect(runs.get(key)).toBe(2);
  });

  test('reply.code(500): released, the retry runs again', async () => {
    const key = v7();
    expect((await post('/500', key)).status).toBe(500);
    await delay(20);
    expect((await post('/500', key)).replayed).toBeNull();
    expect(runs.get(key)).toBe(2);
  });
});

describe('other paths', () => {
  test('the client leaves before the answer: the answer is stored all the same', async () => {
    const key = v7();
    await new Promise<void>((resolve) => {
      const req = httpRequest({
        host: '127.0.0.1',
        port,
        path: '/slow',
        method: 'POST',
        agent: false,
        headers: { 'content-type': 'application/json', 'idempotency-key': key, 'content-length': 7 },
      });
      req.on('error', () => resolve());
      req.end('{"x":1}');
      setTimeout(() => {
        req.destroy();
        resolve();
      }, 30);
    });
    await delay(150);
    const retry = await post('/slow', key);
    expect(retry).toMatchObject({ status: 201, replayed: 'true' });
    expect(runs.get(key)).toBe(1);
  });

  test('an onSend hook that turns the payload into a gzip stream: stored encoded, replayed the same', async () => {
    const key = v7();
    const first = await fetch(`${url}/gz`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': key, 'accept-encoding': 'gzip' },
      body: '{}',
    });
    const firstText = await first.text(); // fetch decodes gzip
    await delay(20);
    const retry = await fetch(`${url}/gz`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': key, 'accept-encoding': 'gzip' },
      body: '{}',
    });
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(retry.headers.get('content-encoding')).toBe(first.headers.get('content-encoding'));
    expect(await retry.text()).toBe(firstText);
    expect(runs.get(key)).toBe(1);
  });

  test('reply.trailer: the body replays (trailers are not stored)', async () => {
    const key = v7();
    const first = await post('/trailer', key);
    await delay(20);
    const retry = await post('/trailer', key);
    expect(retry).toEqual({ ...first, replayed: 'true' });
    expect(runs.get(key)).toBe(1);
  });
});
