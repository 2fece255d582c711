import { request as httpRequest } from 'node:http';
import { Writable } from 'node:stream';
import { gunzipSync, gzipSync } from 'node:zlib';
import { fastifyIdempotency, sendReplay } from '@idem/adapter-fastify';
import { settled } from '@idem/adapter-suite';
import { createMemoryStore } from '@idem/store-memory';
import Fastify, { type FastifyInstance, type FastifyServerOptions, type onSendHookHandler } from 'fastify';
import { v7 } from 'uuid';
import { afterEach, describe, expect, test } from 'vitest';

// A replay is the stored answer, byte for byte: the answer went through the app's onSend hooks once, when it was
// first sent, and what came out of them is what was stored. Sending it through them again would apply a hook
// that is not idempotent (an envelope, a compression that does not look at Content-Encoding) a second time.

let app: FastifyInstance | undefined;
afterEach(async () => {
  await app?.close();
  app = undefined;
});

interface RawAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  bytes: Buffer;
}

function post(url: string, key: string, path = '/orders'): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      `${url}${path}`,
      {
        method: 'POST',
        agent: false,
        headers: {
          'content-type': 'application/json',
          'idempotency-key': key,
          'accept-encoding': 'gzip',
          'content-length': 15,
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, headers: res.headers, bytes: Buffer.concat(chunks) }),
        );
      },
    );
    req.on('error', reject);
    req.end('{"item":"book"}');
  });
}

/** An onSend hook that wraps every JSON answer in an envelope (not idempotent). */
const envelope: onSendHookHandler = async (_request, reply, payload) => {
  if (typeof payload !== 'string' && !Buffer.isBuffer(payload)) return payload;
  if (!String(reply.getHeader('content-type') ?? '').startsWith('application/json')) return payload;
  return `{"data":${String(payload)}}`;
};

/** A compression hook that compresses whatever it is handed (does not look at Content-Encoding). */
const naiveGzip: onSendHookHandler = (_request, reply, payload, done) => {
  if (typeof payload !== 'string' && !Buffer.isBuffer(payload)) return done(null, payload);
  reply.header('content-encoding', 'gzip');
  done(null, gzipSync(payload as string | Buffer));
};

async function start(
  hooks: (app: FastifyInstance) => void,
  serverOptions: FastifyServerOptions = {},
  pluginOptions: Record<string, unknown> = {},
) {
  const store = createMemoryStore({ sweepIntervalMs: false });
  let runs = 0;
  app = Fastify(serverOptions);
  await app.register(fastifyIdempotency, { store, ...pluginOptions });
  hooks(app);
  app.post('/orders', async (_request, reply) =>
    reply.code(201).header('location', '/orders/1').send({ id: ++runs }),
  );
  app.post('/empty', async (_request, reply) => {
    runs++;
    return reply.code(204).send();
  });
  const url = await app.listen({ port: 0, host: '127.0.0.1' });
  return { store, url, runs: () => runs };
}

/** The headers a replay must repeat (what is stored, and how the body is framed for these bytes). */
const replayed = (answer: RawAnswer) => ({
  status: answer.status,
  type: answer.headers['content-type'],
  location: answer.headers.location,
  encoding: answer.headers['content-encoding'],
  length: answer.headers['content-length'],
  bytes: answer.bytes.toString('base64'),
});

describe('a replay does not go through the app’s onSend hooks again', () => {
  test('an envelope hook (app.addHook): the retry gets the envelope the first client got, not an envelope of it', async () => {
    const { store, url, runs } = await start((app) => app.addHook('onSend', envelope));
    const key = v7();
    const first = await post(url, key);
    expect(first.bytes.toString()).toBe('{"data":{"id":1}}');
    await settled(store, key);
    const retry = await post(url, key);
    expect(retry.headers['idempotent-replayed']).toBe('true');
    expect(replayed(retry)).toEqual(replayed(first));
    expect(runs()).toBe(1);
  });

  test('a compression hook that compresses whatever it is handed, appended after the plugin’s: the same gzip bytes, compressed once', async () => {
    const { store, url, runs } = await start((app) =>
      app.addHook('onRoute', (routeOptions) => {
        routeOptions.onSend = [...[routeOptions.onSend ?? []].flat(), naiveGzip] as onSendHookHandler[];
      }),
    );
    const key = v7();
    const first = await post(url, key);
    expect(first.headers['content-encoding']).toBe('gzip');
    await settled(store, key);
    const retry = await post(url, key);
    expect(retry.headers['idempotent-replayed']).toBe('true');
    expect(replayed(retry)).toEqual(replayed(first));
    expect(JSON.parse(gunzipSync(retry.bytes).toString())).toEqual({ id: 1 });
    expect(runs()).toBe(1);
  });

  test('a stored 204 replays as a 204 with no body and no Content-Length', async () => {
    const { store, url, runs } = await start((app) => app.addHook('onSend', envelope));
    const key = v7();
    const first = await post(url, key, '/empty');
    await settled(store, key);
    const retry = await post(url, key, '/empty');
    expect(retry).toMatchObject({ status: 204, bytes: Buffer.alloc(0) });
    expect(retry.headers['idempotent-replayed']).toBe('true');
    expect(retry.headers['content-length']).toBe(first.headers['content-length']);
    expect(runs()).toBe(1);
  });

  test('headers the app set before the plugin (an onRequest hook, as @fastify/cors does) go out with the replay; the stored ones describe the body', async () => {
    const { store, url, runs } = await start((app) => {
      app.addHook('onRequest', async (_request, reply) => {
        reply.header('access-control-allow-origin', '*');
        reply.header('location', '/elsewhere'); // the handler sets its own: the stored one wins
      });
    });
    const key = v7();
    const first = await post(url, key);
    await settled(store, key);
    const retry = await post(url, key);
    expect(retry.headers['access-control-allow-origin']).toBe('*');
    expect(retry.headers['idempotent-replayed']).toBe('true');
    expect(replayed(retry)).toEqual(replayed(first));
    expect(runs()).toBe(1);
  });

  test('onResponse hooks and Fastify’s request log still run for a replay, and see its status and marker', async () => {
    const lines: { msg?: string; res?: { statusCode?: number } }[] = [];
    const logs = new Writable({
      write(chunk, _encoding, callback) {
        for (const line of String(chunk).split('\n')) if (line !== '') lines.push(JSON.parse(line));
        callback();
      },
    });
    const seen: { status: number; replayed: unknown }[] = [];
    const { store, url } = await start(
      (app) => {
        app.addHook('onSend', envelope);
        app.addHook('onResponse', async (_request, reply) => {
          seen.push({ status: reply.statusCode, replayed: reply.getHeader('idempotent-replayed') });
        });
      },
      { logger: { level: 'info', stream: logs } },
    );
    const key = v7();
    await post(url, key);
    await settled(store, key);
    const retry = await post(url, key);
    expect(retry.headers['idempotent-replayed']).toBe('true');
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(seen).toEqual([
      { status: 201, replayed: undefined },
      { status: 201, replayed: 'true' },
    ]);
    const completed = lines.filter((line) => line.msg === 'request completed');
    expect(completed.map((line) => line.res?.statusCode)).toEqual([201, 201]);
  });
});

describe('what is not a replay still goes through the hooks', () => {
  test('the plugin’s own refusal (422, a key reused for another request) is a fresh answer: the hooks apply once', async () => {
    const { store, url } = await start((app) => {
      app.addHook('onSend', envelope);
      app.post('/other', async () => ({ other: true }));
    });
    const key = v7();
    await post(url, key);
    await settled(store, key);
    const reused = await post(url, key, '/other');
    expect(reused.status).toBe(422);
    expect(reused.bytes.toString()).toMatch(/^\{"data":\{"error":\{"code":"IDEMPOTENCY_KEY_REUSED"/);
  });

  test('sendReplay from a handler that reserves in its own transaction: the stored bytes, the hooks not applied again', async () => {
    const store = createMemoryStore({ sweepIntervalMs: false });
    let runs = 0;
    app = Fastify();
    await app.register(fastifyIdempotency, { store, reserveIn: 'transaction' });
    app.addHook('onSend', envelope);
    app.post('/orders', async (request, reply) => {
      const execution = request.idempotency;
      if (execution?.lifecycle !== 'transactional') throw new Error('not transactional');
      const reservation = await execution.reserveWith(store);
      if (reservation.action === 'replay') return sendReplay(reply, reservation.response);
      if (reservation.action !== 'execute') throw new Error(reservation.action);
      return reply.code(201).send({ id: ++runs });
    });
    const url = await app.listen({ port: 0, host: '127.0.0.1' });
    const key = v7();
    const first = await post(url, key);
    expect(first.bytes.toString()).toBe('{"data":{"id":1}}');
    await settled(store, key);
    const retry = await post(url, key);
    expect(retry.headers['idempotent-replayed']).toBe('true');
    expect(replayed(retry)).toEqual(replayed(first));
    expect(runs).toBe(1);
  });
});
