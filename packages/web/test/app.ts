import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import type { AppResponse, Business, MakeServer } from '@idem/adapter-suite';
import { withIdempotency } from '@idem/web';

/** Statuses whose response cannot have a body. */
const NULL_BODY = new Set([204, 205, 304]);
const encoder = new TextEncoder();
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const send = (answer: AppResponse): Response =>
  new Response(NULL_BODY.has(answer.status) ? null : new Uint8Array(answer.body), {
    status: answer.status,
    headers: answer.headers,
  });

const streamed = (chunks: AsyncIterable<string>): Response =>
  new Response(
    ReadableStream.from(
      (async function* () {
        for await (const chunk of chunks) yield encoder.encode(chunk);
      })(),
    ),
    { status: 200, headers: { 'content-type': 'text/plain' } },
  );

async function bodyOf(request: Request): Promise<unknown> {
  const type = request.headers.get('content-type') ?? '';
  return /^application\/json/i.test(type) ? request.json() : request.text();
}

type Route = readonly [
  method: string,
  template: string,
  handle: (request: Request, param: string) => Response | Promise<Response>,
];

/** The suite's routes as a plain fetch handler: a router of its own, no framework. */
function routes(business: Business): Route[] {
  return [
    ['POST', '/orders', async (request) => send(business.createOrder(await bodyOf(request)))],
    ['GET', '/orders', () => send(business.listOrders())],
    [
      'POST',
      '/items/:id',
      async (request, id) => send(business.item(decodeURIComponent(id), await bodyOf(request))),
    ],
    ['POST', '/status/:code', (_request, code) => send(business.status(Number(code)))],
    ['POST', '/throw', () => business.throws()],
    ['POST', '/slow/:ms', async (_request, ms) => send(await business.slow(Number(ms)))],
    [
      'POST',
      '/late/:ms',
      (_request, ms) => {
        const text = business.late(Number(ms));
        return streamed(
          (async function* () {
            yield await text;
          })(),
        );
      },
    ],
    ['POST', '/plan/:name', (_request, name) => streamed(business.plan(name))],
    [
      'POST',
      '/throw-after/:point',
      (_request, point) => {
        const run = business.throwAfter(point);
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
      },
    ],
    [
      'POST',
      '/destroy',
      () => {
        business.destroy();
        return new Response(
          new ReadableStream({ start: (c) => void setTimeout(() => c.error(new Error('broken off')), 10) }),
        );
      },
    ],
    ['PUT', '/files/:id', async (request, id) => send(business.upload(id, await request.text()))],
    ['POST', '/big/:bytes', (_request, bytes) => send(business.big(Number(bytes)))],
    ['POST', '/binary', () => send(business.binary())],
  ];
}

/** The route of a request, and its one parameter. */
function match(table: Route[], request: Request): { route: Route; param: string } | undefined {
  const { pathname } = new URL(request.url);
  for (const route of table) {
    const [method, template] = route;
    if (method !== request.method) continue;
    const [prefix, name] = template.split('/:');
    if (name === undefined ? pathname === prefix : pathname.startsWith(`${prefix}/`))
      return { route, param: name === undefined ? '' : pathname.slice((prefix as string).length + 1) };
  }
  return undefined;
}

/** The suite's app: one fetch handler wrapped by withIdempotency, served by @hono/node-server. */
export function fetchServer(): MakeServer {
  return async ({ options, business }) => {
    const table = routes(business);
    const handler = withIdempotency(
      async (request: Request) => {
        const found = match(table, request);
        if (found === undefined) return new Response('not found', { status: 404 });
        try {
          return await found.route[2](request, found.param);
        } catch {
          return Response.json({ error: 'internal' }, { status: 500 });
        }
      },
      {
        ...options,
        scope:
          (options.scope as ((request: Request) => string | undefined) | undefined) ??
          ((request) => request.headers.get('x-principal') ?? undefined),
        route: (request) => match(table, request)?.route[1] ?? new URL(request.url).pathname,
      } as Parameters<typeof withIdempotency>[1],
    );
    return listen(handler);
  };
}

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
