import { type IdempotencyEnv, idempotency } from '@idem/adapter-hono';
import { createMemoryStore } from '@idem/store-memory';
import { Hono } from 'hono';
import { except } from 'hono/combine';
import { v7 } from 'uuid';
import { describe, expect, test } from 'vitest';

const post = (app: Hono<IdempotencyEnv>, path: string, key: string | undefined, body = '{"item":"book"}') =>
  app.request(path, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(key === undefined ? {} : { 'idempotency-key': key }) },
    body,
  });

describe('idempotency() options on a Hono app', () => {
  test('c.get("idempotency") is the execution inside the handler; formatError gets the context', async () => {
    const app = new Hono<IdempotencyEnv>();
    const seen: (string | undefined)[] = [];
    app.use(
      idempotency({
        store: createMemoryStore(),
        required: true,
        formatError: (error, c) => ({ problem: error.code, path: c.req.path }),
      }),
    );
    app.post('/orders', async (c) => {
      seen.push(c.get('idempotency')?.key);
      return c.json({ item: ((await c.req.json()) as { item: string }).item }, 201);
    });
    const key = v7();
    expect((await post(app, '/orders', key)).status).toBe(201);
    expect(seen).toEqual([key]);
    const missing = await post(app, '/orders', undefined);
    expect(missing.status).toBe(400);
    expect(await missing.json()).toEqual({ problem: 'IDEMPOTENCY_KEY_MISSING', path: '/orders' });
  });

  test('app-wide and per route: one reservation per request, and the route’s own options win', async () => {
    const app = new Hono<IdempotencyEnv>();
    const idem = idempotency({ store: createMemoryStore() });
    let runs = 0;
    app.use(except('/payments', idem));
    app.post('/payments', idem.with({ statuses: { keyReused: 409 } }), (c) => c.json({ run: ++runs }, 201));
    app.post('/orders', idem, (c) => c.json({ run: ++runs }, 201)); // twice on one route: the first takes it
    const key = v7();
    expect((await post(app, '/orders', key)).status).toBe(201);
    expect((await post(app, '/orders', key)).headers.get('idempotent-replayed')).toBe('true');
    const other = v7();
    expect((await post(app, '/payments', other)).status).toBe(201);
    expect((await post(app, '/payments', other, '{"item":"pen"}')).status).toBe(409); // the route's status
    expect(runs).toBe(2);
  });

  test('enabled: false on a route: the header changes nothing there', async () => {
    const app = new Hono<IdempotencyEnv>();
    const idem = idempotency({ store: createMemoryStore() });
    let runs = 0;
    app.post('/webhooks', idem.with({ enabled: false }), (c) => c.json({ run: ++runs }, 201));
    const key = v7();
    await post(app, '/webhooks', key);
    const again = await post(app, '/webhooks', key);
    expect(again.headers.get('idempotent-replayed')).toBeNull();
    expect(runs).toBe(2);
  });

  test('the route template is the identity: two paths of one route under one key are two requests', async () => {
    const app = new Hono<IdempotencyEnv>();
    app.use(idempotency({ store: createMemoryStore() }));
    app.post('/items/:id', (c) => c.json({ id: c.req.param('id') }, 201));
    const key = v7();
    expect((await post(app, '/items/1', key)).status).toBe(201);
    expect((await post(app, '/items/2', key)).status).toBe(422);
  });
});
