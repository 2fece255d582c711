import type { AddressInfo } from 'node:net';
import { gunzipSync } from 'node:zlib';
import { captureRawBody, idempotencyMiddleware } from '@idem/adapter-express';
import { newKey, settled } from '@idem/adapter-suite';
import { createMemoryStore } from '@idem/store-memory';
import compression from 'compression';
import express, { type RequestHandler } from 'express';
import { afterEach, describe, expect, test } from 'vitest';

const payload = { items: Array.from({ length: 200 }, (_, i) => ({ id: i, name: `item ${i}` })) };
const closers: (() => void)[] = [];
afterEach(() => {
  for (const close of closers.splice(0)) close();
});

/** An app with compression mounted before or after the idempotency middleware. */
async function start(order: 'compression first' | 'idempotency first') {
  const store = createMemoryStore({ sweepIntervalMs: false });
  const idem = idempotencyMiddleware({ store });
  const compress = compression({ threshold: 0 }) as unknown as RequestHandler;
  const app = express();
  app.use(express.json({ verify: captureRawBody }));
  if (order === 'compression first') app.use(compress, idem);
  else app.use(idem, compress);
  let runs = 0;
  app.post('/orders', (_req, res) => {
    runs++;
    res.status(201).json(payload);
  });
  // Handlers that send their head before the body, as any streaming handler does.
  app.post('/write-head', (_req, res) => {
    runs++;
    res.writeHead(201, { 'content-type': 'application/json' });
    res.end(JSON.stringify(payload));
  });
  app.post('/flush-headers', (_req, res) => {
    runs++;
    res.status(201).type('application/json');
    res.flushHeaders();
    const text = JSON.stringify(payload);
    res.write(text.slice(0, 100));
    res.end(text.slice(100));
  });
  const server = app.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  closers.push(() => server.close());
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/orders`;
  return { store, url, base: url.replace(/\/orders$/, ''), runs: () => runs };
}

const post = (url: string, key: string, encoding: string) =>
  fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': key, 'accept-encoding': encoding },
    body: '{}',
  });

describe('compression and the idempotency middleware, in either order', () => {
  for (const order of ['compression first', 'idempotency first'] as const) {
    test(`${order}: the replay decodes to the same JSON, and the stored encoding matches the stored bytes`, async () => {
      const { store, url, runs } = await start(order);
      const key = newKey();
      const first = await post(url, key, 'gzip');
      expect(first.headers.get('content-encoding')).toBe('gzip');
      expect(await first.json()).toEqual(payload);
      await settled(store, key);
      const retry = await post(url, key, 'gzip');
      expect(retry.headers.get('idempotent-replayed')).toBe('true');
      expect(await retry.json()).toEqual(payload);
      expect(runs()).toBe(1);
      const stored = (await store.load({ scope: '', key }))?.response;
      const bytes = Buffer.from(stored?.body ?? []);
      if (order === 'compression first') {
        // The middleware sits inside compression: it sees, and stores, the plain bytes.
        expect(stored?.headers['content-encoding']).toBeUndefined();
        expect(JSON.parse(bytes.toString())).toEqual(payload);
      } else {
        // Compression sits inside: the stored bytes are gzip, and stored as such.
        expect(stored?.headers['content-encoding']).toBe('gzip');
        expect(JSON.parse(gunzipSync(bytes).toString())).toEqual(payload);
      }
    });
  }

  for (const order of ['compression first', 'idempotency first'] as const) {
    for (const route of ['/write-head', '/flush-headers']) {
      test(`${order}, head sent before the body (${route}): the stored encoding matches the stored bytes`, async () => {
        const { store, base, runs } = await start(order);
        const key = newKey();
        const first = await post(base + route, key, 'gzip');
        expect(await first.json()).toEqual(payload);
        const stored = (await settled(store, key))?.response;
        const bytes = Buffer.from(stored?.body ?? []);
        const encoding = stored?.headers['content-encoding'];
        expect(JSON.parse((encoding === 'gzip' ? gunzipSync(bytes) : bytes).toString())).toEqual(payload);
        expect(encoding).toBe(order === 'compression first' ? undefined : 'gzip');
        const retry = await post(base + route, key, 'gzip');
        expect(retry.headers.get('idempotent-replayed')).toBe('true');
        expect(await retry.json()).toEqual(payload);
        expect(runs()).toBe(1);
      });
    }
  }

  test('compression first: a retry from a client without gzip gets plain bytes', async () => {
    const { url, store } = await start('compression first');
    const key = newKey();
    await (await post(url, key, 'gzip')).arrayBuffer();
    await settled(store, key); // the answer can reach the client before its record is stored
    const retry = await post(url, key, 'identity');
    expect(retry.headers.get('content-encoding')).toBeNull();
    expect(await retry.json()).toEqual(payload);
  });
});
