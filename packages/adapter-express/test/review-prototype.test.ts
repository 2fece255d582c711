import type { AddressInfo } from 'node:net';
import { captureRawBody, idempotencyMiddleware } from '@idem/adapter-express';
import { spiedStore } from '@idem/adapter-suite';
import express from 'express';
import express4 from 'express4';
import { v7 } from 'uuid';
import { afterEach, describe, expect, test } from 'vitest';

// Review of the Express capture on the shared response prototype (78ee968): the wrappers on express.response
// find a request's capture in `res.locals[symbol]`. Anything that replaces `res.locals` after the middleware
// ran hides the capture from the wrappers.

const closers: (() => void)[] = [];
afterEach(() => {
  for (const close of closers.splice(0)) close();
});

type Factory = typeof express;

async function listen(app: ReturnType<Factory>): Promise<string> {
  const server = app.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  closers.push(() => server.close());
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

const post = async (url: string, key: string) => {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': key },
    body: '{"item":"book"}',
  });
  return {
    status: response.status,
    body: await response.text(),
    replayed: response.headers.get('idempotent-replayed'),
  };
};

const delay = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe.each([
  ['express 5', express],
  ['express 4', express4 as unknown as Factory],
])('%s: res.locals replaced by a middleware after the idempotency middleware', (_name, factory) => {
  test('the 201 the client got is stored and replayed whole (not with its body omitted)', async () => {
    const { store, finalized } = spiedStore();
    let runs = 0;
    const app = factory();
    app.use(express.json({ verify: captureRawBody }), idempotencyMiddleware({ store }));
    // A common pattern: an auth middleware that sets the locals object wholesale.
    app.use((_req, res, next) => {
      res.locals = { user: 'ada' };
      next();
    });
    app.post('/orders', (_req, res) => {
      runs++;
      res.status(201).json({ id: runs, by: res.locals.user });
    });
    const url = `${await listen(app)}/orders`;
    const key = v7();
    const first = await post(url, key);
    expect(first).toEqual({ status: 201, body: '{"id":1,"by":"ada"}', replayed: null });
    await delay(50);
    // Actual: the capture is no longer found by the prototype wrappers, so nothing sees the `end`; the close
    // listener then settles it as a response cut short after its status: body null, bodyOmitted.
    expect(finalized).toHaveLength(1);
    expect(finalized[0]).not.toMatchObject({ body: null });
    const retry = await post(url, key);
    expect(retry).toEqual({ ...first, replayed: 'true' });
    expect(runs).toBe(1);
  });
});

test('(held) res.locals replaced by a spread copy ({ ...res.locals, user }): the symbol is copied, stored whole', async () => {
  const { store, finalized } = spiedStore();
  let runs = 0;
  const app = express();
  app.use(express.json({ verify: captureRawBody }), idempotencyMiddleware({ store }));
  app.use((_req, res, next) => {
    res.locals = { ...res.locals, user: 'ada' };
    next();
  });
  app.post('/orders', (_req, res) => {
    runs++;
    res.status(201).json({ id: runs });
  });
  const url = `${await listen(app)}/orders`;
  const key = v7();
  const first = await post(url, key);
  await delay(50);
  expect(finalized[0]).not.toMatchObject({ body: null });
  expect(await post(url, key)).toEqual({ ...first, replayed: 'true' });
  expect(runs).toBe(1);
});

describe('one locals object shared by several responses (a middleware before the idempotency middleware sets it)', () => {
  test('a response of another request written meanwhile must not end up in the keyed answer that is stored', async () => {
    const { store, finalized } = spiedStore();
    let runs = 0;
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const app = express();
    const defaults = { site: 'shop' }; // (a mistake, but an easy one: res.locals = defaults instead of a copy)
    app.use((_req, res, next) => {
      res.locals = defaults;
      next();
    });
    app.use(express.json({ verify: captureRawBody }), idempotencyMiddleware({ store }));
    app.get('/health', (_req, res) => void res.json({ ok: true }));
    app.post('/orders', async (_req, res) => {
      runs++;
      res.status(201).type('application/json');
      res.write('{"id":');
      await gate;
      res.end(`${runs}}`);
    });
    const base = await listen(app);
    const key = v7();
    const pending = post(`${base}/orders`, key);
    await delay(100);
    // Meanwhile an unkeyed GET is answered: the prototype wrappers find the keyed request's capture in the
    // shared locals and feed this response into it, and its `end` settles the keyed request.
    expect(await (await fetch(`${base}/health`)).text()).toBe('{"ok":true}');
    release();
    const first = await pending;
    expect(first).toEqual({ status: 201, body: '{"id":1}', replayed: null });
    await delay(50);
    expect(finalized.map((r) => Buffer.from(r.body ?? '').toString())).toEqual(['{"id":1}']);
    expect(await post(`${base}/orders`, key)).toEqual({ ...first, replayed: 'true' });
    expect(runs).toBe(1);
  });
});

describe('a locals object that cannot take a new property', () => {
  test('res.locals frozen by a middleware before the idempotency middleware: the key must not stay in flight for ever', async () => {
    const { store } = spiedStore();
    let runs = 0;
    const app = express();
    app.use((_req, res, next) => {
      res.locals = Object.freeze({ user: 'ada' });
      next();
    });
    app.use(express.json({ verify: captureRawBody }), idempotencyMiddleware({ store }));
    app.post('/orders', (_req, res) => {
      runs++;
      res.status(201).json({ id: runs });
    });
    const url = `${await listen(app)}/orders`;
    const key = v7();
    const first = await post(url, key);
    // Actual: setting the capture on the frozen locals throws inside startExecution, after the key was reserved;
    // the error goes to next(err) (a 500), and nothing ever finishes or aborts the execution: its heartbeat
    // renews the lease, and every retry is 409 IDEMPOTENCY_IN_PROGRESS.
    await delay(50);
    const retry = await post(url, key);
    expect(retry.status).not.toBe(409);
    expect([first.status, retry.status]).toContain(201);
  });
});
