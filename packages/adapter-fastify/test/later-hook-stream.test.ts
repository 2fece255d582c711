import { request as httpRequest } from 'node:http';
import { PassThrough, pipeline, Readable } from 'node:stream';
import { createGzip, gunzipSync } from 'node:zlib';
import { fastifyIdempotency } from '@idem/adapter-fastify';
import { settled, spiedStore } from '@idem/adapter-suite';
import Fastify, { type FastifyInstance, type onSendHookHandler } from 'fastify';
import { v7 } from 'uuid';
import { afterEach, describe, expect, test } from 'vitest';

// A plugin registered after the idempotency plugin that appends its onSend hook to each route in onRoute, as
// @fastify/compress does: its hook runs after the plugin's, and turns the whole answer the plugin saw into a
// gzip stream (Content-Encoding: gzip, Vary, no Content-Length).

let app: FastifyInstance | undefined;
afterEach(async () => {
  await app?.close();
  app = undefined;
});

const delay = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * @fastify/compress's onSend hook, reduced: a callback hook that skips an answer already encoded, and pipes any
 * other into a gzip stream it hands on at once. `startAfterMs`: the stream's source waits that long before its
 * first byte (a slow upstream).
 */
function compressHook(startAfterMs = 0): onSendHookHandler {
  return (request, reply, payload, next) => {
    if (payload === null || payload === undefined) return next();
    const encoding = reply.getHeader('content-encoding');
    if (encoding !== undefined && encoding !== 'identity') return next();
    if (!String(request.headers['accept-encoding'] ?? '').includes('gzip')) return next(null, payload);
    const source =
      typeof (payload as { pipe?: unknown }).pipe === 'function'
        ? (payload as unknown as Readable)
        : startAfterMs > 0
          ? Readable.from(
              (async function* () {
                await delay(startAfterMs);
                yield payload as string;
              })(),
            )
          : Readable.from([payload as string]);
    reply.header('vary', 'accept-encoding');
    reply.header('content-encoding', 'gzip');
    reply.removeHeader('content-length');
    const gzip = createGzip();
    pipeline(source, gzip, () => {});
    next(null, gzip);
  };
}

/** The same as an async hook (a promise of the stream). */
const asyncCompressHook: onSendHookHandler = async (_request, reply, payload) => {
  if (reply.getHeader('content-encoding') !== undefined) return payload;
  reply.header('content-encoding', 'gzip');
  reply.removeHeader('content-length');
  await delay(5);
  const gzip = createGzip();
  gzip.end(payload as string);
  return gzip.pipe(new PassThrough());
};

/** A later plugin's hook, appended to every route in onRoute (registered after the idempotency plugin). */
function laterRouteHook(hook: onSendHookHandler) {
  app?.addHook('onRoute', (routeOptions) => {
    routeOptions.onSend = [...[routeOptions.onSend ?? []].flat(), hook] as onSendHookHandler[];
  });
}

interface RawAnswer {
  status: number;
  type: string | undefined;
  encoding: string | undefined;
  replayed: string | undefined;
  omitted: string | undefined;
  bytes: Buffer;
}

/** A keyed POST that reads the bytes as they came over the wire (fetch would decode gzip). */
function post(url: string, key: string): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      `${url}/orders`,
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
          resolve({
            status: res.statusCode ?? 0,
            type: res.headers['content-type'],
            encoding: res.headers['content-encoding'],
            replayed: res.headers['idempotent-replayed'] as string | undefined,
            omitted: res.headers['idempotent-replay-body-omitted'] as string | undefined,
            bytes: Buffer.concat(chunks),
          }),
        );
      },
    );
    req.on('error', reject);
    req.end('{"item":"book"}');
  });
}

/** A keyed POST whose client leaves once `leave` resolves. */
async function postAndLeave(url: string, key: string, leave: Promise<unknown>): Promise<void> {
  const req = httpRequest(`${url}/orders`, {
    method: 'POST',
    agent: false,
    headers: {
      'content-type': 'application/json',
      'idempotency-key': key,
      'accept-encoding': 'gzip',
      'content-length': 15,
    },
  });
  req.on('error', () => {});
  req.end('{"item":"book"}');
  await leave;
  req.destroy();
}

async function start(hook: onSendHookHandler, handlerDelayMs = 0) {
  const { store, finalized } = spiedStore();
  let runs = 0;
  let entered!: () => void;
  const handlerEntered = new Promise<void>((resolve) => {
    entered = resolve;
  });
  app = Fastify();
  await app.register(fastifyIdempotency, { store });
  laterRouteHook(hook);
  app.post('/orders', async (_request, reply) => {
    runs++;
    entered();
    if (handlerDelayMs > 0) await delay(handlerDelayMs);
    return reply.code(201).send({ id: runs, pad: 'x'.repeat(200) });
  });
  const url = await app.listen({ port: 0, host: '127.0.0.1' });
  return { store, finalized, url, runs: () => runs, handlerEntered };
}

describe("a later plugin's onSend hook turns the answer into a gzip stream", () => {
  for (const [name, hook] of [
    ['a callback hook, as @fastify/compress', compressHook()],
    ['an async hook', asyncCompressHook],
  ] as const) {
    test(`${name}: the gzip bytes are stored with their encoding, the retry gets the same bytes, the handler ran once`, async () => {
      const { store, finalized, url, runs } = await start(hook);
      const key = v7();
      const first = await post(url, key);
      expect(first).toMatchObject({ status: 201, encoding: 'gzip', replayed: undefined });
      expect(JSON.parse(gunzipSync(first.bytes).toString())).toMatchObject({ id: 1 });
      await settled(store, key);
      expect(finalized).toHaveLength(1);
      expect(finalized[0]?.headers['content-encoding']).toBe('gzip');
      expect(Buffer.from(finalized[0]?.body ?? []).equals(first.bytes)).toBe(true);
      const retry = await post(url, key);
      expect(retry).toEqual({ ...first, replayed: 'true' });
      expect(runs()).toBe(1);
    });
  }

  test('the client leaves before the answer is handed over: its status is stored, never the plain bytes the plugin saw labelled gzip', async () => {
    const { store, finalized, url, runs, handlerEntered } = await start(compressHook(), 100);
    const key = v7();
    await postAndLeave(url, key, handlerEntered);
    await delay(200);
    await settled(store, key);
    // Nothing went out, and what the later hook made of the answer is not known (the stream it made was dropped
    // for a client that is gone): the status is stored, the body omitted. (It was the plain JSON the plugin's
    // hook saw, stored as gzip because the later hook had set Content-Encoding: garbage on every replay.)
    expect(finalized).toEqual([
      {
        status: 201,
        headers: { 'content-type': 'application/json; charset=utf-8' },
        body: null,
        bodyOmitted: true,
      },
    ]);
    const retry = await post(url, key);
    expect(retry).toMatchObject({ status: 201, replayed: 'true', omitted: 'true', encoding: undefined });
    expect(retry.bytes.length).toBe(0);
    expect(runs()).toBe(1);
  });

  test('its stream is slow to start and the client leaves before the first byte: the key settles at once, status kept, body omitted', async () => {
    const { store, url, runs } = await start(compressHook(300));
    const key = v7();
    // The handler answers at once; the client leaves while the hook's stream waits for its source.
    await postAndLeave(url, key, delay(100));
    await delay(50);
    // Settled at once (the lease would otherwise be renewed until maxExecutionMs, never set here).
    const record = await store.load({ scope: '', key });
    expect(record?.response).toMatchObject({ status: 201, body: null, bodyOmitted: true });
    await delay(300);
    const retry = await post(url, key);
    expect(retry).toMatchObject({ status: 201, replayed: 'true', omitted: 'true' });
    expect(runs()).toBe(1);
  });
});
