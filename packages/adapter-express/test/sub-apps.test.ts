import type { AddressInfo } from 'node:net';
import { captureRawBody, idempotencyMiddleware } from '@idem/adapter-express';
import { newKey } from '@idem/adapter-suite';
import { createMemoryStore } from '@idem/store-memory';
import express, { type Express } from 'express';
import { afterEach, describe, expect, test } from 'vitest';

// Express gives a request's `res` the prototype of the app it is in, and swaps it when the request enters or
// leaves a mounted sub-app: the capture (on the response prototype all of them share) must see every answer.

const closers: (() => void)[] = [];
afterEach(() => {
  for (const close of closers.splice(0)) close();
});

async function listen(app: Express): Promise<string> {
  const server = app.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  closers.push(() => server.close());
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

const post = (url: string, key: string) =>
  fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': key },
    body: '{"item":"book"}',
  });

describe('mounted sub-apps', () => {
  test('the middleware on the app, the handler in a sub-app (streamed in two writes): stored and replayed', async () => {
    let runs = 0;
    const app = express();
    app.use(express.json({ verify: captureRawBody }), idempotencyMiddleware({ store: createMemoryStore() }));
    const orders = express();
    orders.post('/', (_req, res) => {
      runs++;
      res.status(201).type('application/json');
      res.write('{"id":');
      res.end(`${runs}}`);
    });
    app.use('/orders', orders);
    const url = `${await listen(app)}/orders`;
    const key = newKey();
    const first = await post(url, key);
    expect(first.status).toBe(201);
    expect(await first.text()).toBe('{"id":1}');
    const again = await post(url, key);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.status).toBe(201);
    expect(await again.text()).toBe('{"id":1}');
    expect(runs).toBe(1);
  });

  test('the middleware in a sub-app, the handler after it in the parent app: stored and replayed', async () => {
    let runs = 0;
    const app = express();
    const guarded = express();
    guarded.use(
      express.json({ verify: captureRawBody }),
      idempotencyMiddleware({ store: createMemoryStore() }),
    );
    app.use(guarded);
    // Reached after the request left the sub-app: its `res` has the parent's prototype again.
    app.post('/orders', (_req, res) => {
      runs++;
      res.status(201).json({ id: runs });
    });
    const url = `${await listen(app)}/orders`;
    const key = newKey();
    expect(await (await post(url, key)).json()).toEqual({ id: 1 });
    const again = await post(url, key);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(await again.json()).toEqual({ id: 1 });
    expect(runs).toBe(1);
  });

  test('responses of requests without a key, and of other apps in the process, pass through untouched', async () => {
    const app = express();
    app.use(express.json({ verify: captureRawBody }), idempotencyMiddleware({ store: createMemoryStore() }));
    app.post('/orders', (_req, res) => res.status(201).json({ ok: true }));
    const other = express();
    other.post('/plain', (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end('plain');
    });
    const url = await listen(app);
    const otherUrl = await listen(other);
    const keyed = await post(`${url}/orders`, newKey());
    expect(keyed.status).toBe(201);
    const unkeyed = await fetch(`${url}/orders`, { method: 'POST', body: '{}' });
    expect(await unkeyed.json()).toEqual({ ok: true });
    const plain = await fetch(`${otherUrl}/plain`, { method: 'POST' });
    expect(await plain.text()).toBe('plain');
  });
});
