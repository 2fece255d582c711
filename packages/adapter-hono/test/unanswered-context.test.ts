import { type IdempotencyEnv, idempotency } from '@idem/adapter-hono';
import type { IdempotencyStore } from '@idem/core';
import { createMemoryStore } from '@idem/store-memory';
import { type Context, Hono } from 'hono';
import { v7 } from 'uuid';
import { describe, expect, onTestFinished, test, vi } from 'vitest';

// A request on which nothing answers after this middleware: a middleware mounted after it that returns without
// a response and without calling next() (it type-checks: a middleware may return void), or a handler in plain
// JavaScript with the classic missing `return` (`c.json(...)` without `return`). Hono then fails the request
// ("Context is not finalized": its error handler's 500), and `c.res` would only make up an empty 200. No answer
// was given: the key is released, as for a handler that threw, and nothing is stored.

async function stateOf(store: IdempotencyStore, key: string): Promise<string | undefined> {
  const record = await store.load({ scope: '', key });
  if (record === undefined) return undefined;
  return record.response === null ? 'in-flight' : 'completed';
}

const mistakes: Record<string, (app: Hono<IdempotencyEnv>, ran: () => void) => void> = {
  'a middleware after it that returns nothing (forgot `return c.text(…, 401)`)': (app, ran) => {
    app.use(async (c, next) => {
      ran();
      if (c.req.header('authorization') === undefined) {
        c.status(401); // meant: return c.text('unauthorized', 401)
        return;
      }
      await next();
    });
    app.post('/orders', (c) => c.json({ id: 1 }, 201));
  },
  'a plain-JS handler that forgot `return`': (app, ran) => {
    const handler = (c: Context) => {
      ran();
      c.json({ id: 1 }, 201);
    };
    app.post('/orders', handler as unknown as (c: Context) => Response);
  },
  'a plain-JS async handler that forgot `return`': (app, ran) => {
    const handler = async (c: Context) => {
      ran();
      await Promise.resolve();
      c.header('location', '/orders/1');
    };
    app.post('/orders', handler as unknown as (c: Context) => Promise<Response>);
  },
};

const onErrors: Record<string, ((app: Hono<IdempotencyEnv>) => void) | undefined> = {
  'Hono’s default error handler': undefined,
  'the app’s onError': (app) => app.onError((error, c) => c.json({ error: error.message }, 500)),
};

describe('a request nothing answers after the middleware', () => {
  for (const [name, mount] of Object.entries(mistakes)) {
    for (const [handling, onError] of Object.entries(onErrors)) {
      test(`${name}, ${handling}: the key is released, no empty 200 stored or replayed`, async () => {
        // (Hono's default error handler logs the error it answers.)
        const logged = vi.spyOn(console, 'error').mockImplementation(() => {});
        onTestFinished(() => logged.mockRestore());
        const store = createMemoryStore({ sweepIntervalMs: false });
        const app = new Hono<IdempotencyEnv>();
        app.use(idempotency({ store }));
        onError?.(app);
        let runs = 0;
        mount(app, () => {
          runs++;
        });
        const key = v7();
        const send = () =>
          app.request('/orders', {
            method: 'POST',
            headers: { 'content-type': 'application/json', 'idempotency-key': key },
            body: '{"item":"book"}',
          });
        const first = await send();
        const firstAnswer = { status: first.status, body: await first.text() };
        expect(firstAnswer.status).toBe(500); // what Hono answered the client
        const state = await stateOf(store, key);
        const retry = await send();
        const retryAnswer = {
          status: retry.status,
          replayed: retry.headers.get('idempotent-replayed'),
          body: await retry.text(),
        };
        // Released, so the retry runs again (and fails the same way), never a stored 200.
        expect({ state: state ?? 'released', retry: retryAnswer }).toEqual({
          state: 'released',
          retry: { status: 500, replayed: null, body: firstAnswer.body },
        });
        expect(runs).toBe(2);
      });
    }
  }

  test('a middleware after it that answers after next(): its answer settles the key', async () => {
    const store = createMemoryStore({ sweepIntervalMs: false });
    const app = new Hono<IdempotencyEnv>();
    app.use(idempotency({ store }));
    app.use(async (c, next) => {
      await next();
      c.res = new Response('rewritten', { status: 201 });
    });
    app.post('/orders', (c) => c.json({ id: 1 }, 201));
    const key = v7();
    const init = {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': key },
      body: '{"item":"book"}',
    };
    expect(await (await app.request('/orders', init)).text()).toBe('rewritten');
    const retry = await app.request('/orders', init);
    expect([retry.status, retry.headers.get('idempotent-replayed'), await retry.text()]).toEqual([
      201,
      'true',
      'rewritten',
    ]);
  });
});
