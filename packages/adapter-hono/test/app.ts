import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { type IdempotencyEnv, idempotency } from '@idem/adapter-hono';
import type { AppResponse, MakeServer } from '@idem/adapter-suite';
import { type Context, Hono } from 'hono';

/** Statuses whose response cannot have a body. */
const NULL_BODY = new Set([204, 205, 304]);
const encoder = new TextEncoder();
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export const send = (answer: AppResponse): Response =>
  new Response(NULL_BODY.has(answer.status) ? null : new Uint8Array(answer.body), {
    status: answer.status,
    headers: answer.headers,
  });

/** A streamed text/plain answer: `chunks` from an async iterable, failing where it throws. */
const streamed = (chunks: AsyncIterable<string>): Response =>
  new Response(
    ReadableStream.from(
      (async function* () {
        for await (const chunk of chunks) yield encoder.encode(chunk);
      })(),
    ),
    { status: 200, headers: { 'content-type': 'text/plain' } },
  );

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
    // The status goes out with the Response; the body follows `ms` later.
    app.post('/late/:ms', (c) => {
      const text = business.late(Number(c.req.param('ms')));
      return streamed(
        (async function* () {
          yield await text;
        })(),
      );
    });
    app.post('/plan/:name', (c) => streamed(business.plan(c.req.param('name'))));
    // A Web handler cannot throw once it returned: its body stream fails instead, after the point.
    app.post('/throw-after/:point', (c) => {
      const run = business.throwAfter(c.req.param('point'));
      return streamed(
        (async function* () {
          if (run.point !== 'status') yield 'first,';
          if (run.point === 'end') {
            yield 'end';
            return;
          }
          await sleep(20);
          run.fail();
        })(),
      );
    });
    // Broken off before any byte: the body fails at once.
    app.post('/destroy', () => {
      business.destroy();
      return new Response(
        new ReadableStream({
          start: (controller) => {
            setTimeout(() => controller.error(new Error('broken off')), 10);
          },
        }),
      );
    });
    app.put('/files/:id', async (c) => send(business.upload(c.req.param('id'), await c.req.text())));
    app.post('/big/:bytes', (c) => send(business.big(Number(c.req.param('bytes')))));
    app.post('/binary', () => send(business.binary()));
    app.onError((_error, c) => c.json({ error: 'internal' }, 500));
    return listen(app.fetch);
  };
}

/** Serve `fetch` on a free port with @hono/node-server. */
export async function listen(
  fetch: (request: Request) => Response | Promise<Response>,
): Promise<{ url: string; close(): Promise<void> }> {
  const server = await new Promise<ReturnType<typeof serve>>((resolve) => {
    const started = serve({ fetch, port: 0, hostname: '127.0.0.1' }, () => resolve(started));
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        if ('closeAllConnections' in server) server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
