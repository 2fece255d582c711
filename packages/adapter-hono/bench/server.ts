process.on('SIGTERM', () => process.exit(0)); // flush a --cpu-prof profile when the bench stops us

// One benchmark server per process, chosen by argv[2]; prints its port on stdout when listening.
import { createHash } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { createMemoryStore } from '@idem/store-memory';
import { Hono, type MiddlewareHandler } from 'hono';
import { idempotency } from '../src/index.js';

const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/i;

/**
 * The floor: the least any Idempotency-Key middleware must do on Hono. A UUIDv7 regex on the header (400 if it
 * is not one), the raw body from Hono's own cached reader (`c.req.text()`, which the handler's `c.req.json()`
 * then reuses), a SHA-256 over method, URL and raw body, a `Map` reserve (a completed key replays, an in-flight
 * one answers 409, another fingerprint 422), the answer taken where Hono hands it over (the `Response` in
 * `c.res` after `next()`, read and handed back as a response of the text read) and a `Map` finalize.
 */
function floor(): MiddlewareHandler {
  type Entry = { fingerprint: string; done?: { status: number; type: string; payload: string } };
  const keys = new Map<string, Entry>();
  return async (c, next) => {
    const key = c.req.header('idempotency-key');
    if (key === undefined || c.req.method !== 'POST') return next();
    if (!UUID_V7.test(key)) return c.json({ error: 'Idempotency-Key must be a UUIDv7' }, 400);
    const raw = await c.req.text();
    const fingerprint = createHash('sha256')
      .update(`${c.req.method} ${c.req.url}\n`)
      .update(raw)
      .digest('base64url');
    const entry = keys.get(key);
    if (entry !== undefined) {
      if (entry.fingerprint !== fingerprint) return c.json({ error: 'key reused, other request' }, 422);
      if (entry.done === undefined) return c.json({ error: 'request in flight' }, 409);
      const { status, type, payload } = entry.done;
      return new Response(payload, { status, headers: { 'content-type': type } });
    }
    keys.set(key, { fingerprint });
    await next();
    const response = c.res;
    if (response.status >= 500) {
      keys.delete(key); // a server error is not kept: a retry runs again
      return;
    }
    // Read once and handed back as a new response of that text: cheaper than reading a clone, which tees.
    const payload = await response.text();
    c.res = new Response(payload, response);
    const type = response.headers.get('content-type') ?? 'application/json';
    keys.set(key, { fingerprint, done: { status: response.status, type, payload } });
  };
}

const variant = process.argv[2];
const app = new Hono();
if (variant === 'idem') app.use(idempotency({ store: createMemoryStore() }));
if (variant === 'floor') app.use(floor());
if (variant === 'noop') app.use(async (_c, next) => next());
let orders = 0;
app.post('/orders', async (c) => {
  orders++;
  const body = (await c.req.json()) as { item: string; lines: unknown[] };
  return c.json({ id: orders, item: body.item, lines: body.lines.length }, 201);
});
app.get('/count', (c) => c.json({ orders }));
const server = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, () => {
  console.log((server.address() as AddressInfo).port);
});
