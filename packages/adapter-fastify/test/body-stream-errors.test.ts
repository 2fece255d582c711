import { connect } from 'node:net';
import { gzipSync } from 'node:zlib';
import { fastifyIdempotency } from '@idem/adapter-fastify';
import { createMemoryStore } from '@idem/store-memory';
import Fastify from 'fastify';
import { v7 } from 'uuid';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { gunzipBody } from './support/gunzip-body.js';

// A keyed request whose body stream fails half-way (the client hangs up, or a stream put before the plugin's own
// by a preParsing hook errors): the plugin tees the body with pipe, which does not pass a source's errors on, so
// it forwards them itself. The error has to reach Fastify's body parser (a 400, no handler run), never the process
// as an uncaught exception, and the key must stay free for the retry.

const SCOPE = 'tenant';
const store = createMemoryStore({ sweepIntervalMs: false });
const app = Fastify();
const runs = new Map<string, number>();
const errors: { key: string; message: string }[] = [];
let url: string;
let port: number;

beforeAll(async () => {
  await app.register(fastifyIdempotency, { store, scope: () => SCOPE });
  app.addHook('preParsing', gunzipBody); // decompression, app-wide: before the plugin's hook
  app.addHook('onError', async (request, _reply, error) => {
    errors.push({ key: String(request.headers['idempotency-key']), message: error.message });
  });
  app.post('/orders', async (request, reply) => {
    const key = String(request.headers['idempotency-key']);
    runs.set(key, (runs.get(key) ?? 0) + 1);
    return reply.code(201).send({ order: request.body });
  });
  url = await app.listen({ port: 0, host: '127.0.0.1' });
  port = Number(new URL(url).port);
});
afterAll(() => app.close());

/** Send the head of a keyed POST announcing 100 bytes and `part` of them, then destroy the socket. */
function hangUpMidBody(key: string, part: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => {
      socket.write(
        'POST /orders HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n' +
          `content-length: 100\r\nidempotency-key: ${key}\r\n\r\n${part}`,
        () => setTimeout(() => socket.destroy(), 50), // the server has read the partial body
      );
    });
    socket.on('close', () => resolve());
    socket.on('error', reject);
  });
}

async function until(condition: () => boolean): Promise<void> {
  for (let i = 0; i < 200 && !condition(); i++) await new Promise((resolve) => setTimeout(resolve, 10));
}

const post = (key: string, body: string | Buffer, headers: Record<string, string> = {}) =>
  fetch(`${url}/orders`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': key, ...headers },
    body,
  });

describe('Fastify: a keyed request whose body stream fails half-way', () => {
  test('the client destroys the socket mid-body: the parser gets the error, the key is not in flight, the retry executes once', async () => {
    const key = v7();
    await hangUpMidBody(key, '{"item":');
    await until(() => errors.some((error) => error.key === key));
    expect(errors.filter((error) => error.key === key).map((error) => error.message)).toEqual(['aborted']);
    expect(runs.get(key)).toBeUndefined();
    expect(await store.load({ scope: SCOPE, key })).toBeUndefined(); // never reserved, so not in flight

    const retry = await post(key, '{"item":"book"}');
    expect(retry.status).toBe(201);
    expect(await retry.json()).toEqual({ order: { item: 'book' } });
    const replay = await post(key, '{"item":"book"}');
    expect(replay.status).toBe(201);
    expect(runs.get(key)).toBe(1);
    expect((await store.load({ scope: SCOPE, key }))?.owner).toBeNull(); // completed
  });

  test('a stream before the tee fails (corrupt gzip): a 400, no uncaught exception, the key is free for the retry', async () => {
    const key = v7();
    const good = gzipSync('{"item":"book"}');
    const corrupt = Buffer.concat([good.subarray(0, 10), Buffer.from('not deflate data at all')]);
    const failed = await post(key, corrupt, { 'content-encoding': 'gzip' });
    expect(failed.status).toBe(400);
    expect(await failed.json()).toMatchObject({ code: 'Z_DATA_ERROR' });
    expect(runs.get(key)).toBeUndefined();
    expect(await store.load({ scope: SCOPE, key })).toBeUndefined();

    const retry = await post(key, good, { 'content-encoding': 'gzip' });
    expect(retry.status).toBe(201);
    expect(await retry.json()).toEqual({ order: { item: 'book' } });
    expect(runs.get(key)).toBe(1);
  });

  test('the server still answers other requests afterwards', async () => {
    const key = v7();
    const response = await post(key, '{"item":"pen"}');
    expect(response.status).toBe(201);
    expect(runs.get(key)).toBe(1);
  });
});
