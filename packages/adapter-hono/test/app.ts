import { type IdempotencyEnv, idempotency } from '@idem/adapter-hono';
import {
  brokenResponse,
  lateResponse,
  type MakeServer,
  webResponse as send,
  serveFetch,
  streamedResponse,
  throwAfterResponse,
} from '@idem/adapter-suite';
import { type Context, Hono } from 'hono';

/** The body as the test routes use it: JSON parsed, anything else as text. */
async function bodyOf(c: Context): Promise<unknown> {
  const type = c.req.header('content-type') ?? '';
  if (/^application\/json/i.test(type)) return c.req.json();
  return c.req.text();
}

/** The suite's routes on a Hono app served by @hono/node-server: answers are Web `Response`s only. */
export function honoServer(): MakeServer {
  return async ({ options, business }) => {
    const app = new Hono<IdempotencyEnv>();
    app.use(
      idempotency({
        ...options,
        scope:
          (options.scope as ((c: Context) => string | undefined) | undefined) ??
          ((c) => c.req.header('x-principal')),
      } as Parameters<typeof idempotency>[0]),
    );
    app.post('/orders', async (c) => send(business.createOrder(await bodyOf(c))));
    app.get('/orders', () => send(business.listOrders()));
    app.post('/items/:id', async (c) => send(business.item(c.req.param('id'), await bodyOf(c))));
    app.post('/status/:code', (c) => send(business.status(Number(c.req.param('code')))));
    app.post('/throw', () => business.throws());
    app.post('/slow/:ms', async (c) => send(await business.slow(Number(c.req.param('ms')))));
    app.post('/late/:ms', (c) => lateResponse(business, Number(c.req.param('ms'))));
    app.post('/plan/:name', (c) => streamedResponse(business.plan(c.req.param('name'))));
    app.post('/throw-after/:point', (c) => throwAfterResponse(business, c.req.param('point')));
    app.post('/destroy', () => brokenResponse(business));
    app.put('/files/:id', async (c) => send(business.upload(c.req.param('id'), await c.req.text())));
    app.post('/big/:bytes', (c) => send(business.big(Number(c.req.param('bytes')))));
    app.post('/binary', () => send(business.binary()));
    app.onError((_error, c) => c.json({ error: 'internal' }, 500));
    return serveFetch(app.fetch);
  };
}

/** Serve a fetch handler (a Hono app's `fetch`) on a free port, as the suite's servers are. */
export const listen = serveFetch;
