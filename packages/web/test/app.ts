import {
  type Business,
  brokenResponse,
  lateResponse,
  type MakeServer,
  webResponse as send,
  serveFetch,
  streamedResponse,
  throwAfterResponse,
} from '@idem/adapter-suite';
import { withIdempotency } from '@idem/web';

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
    ['POST', '/late/:ms', (_request, ms) => lateResponse(business, Number(ms))],
    ['POST', '/plan/:name', (_request, name) => streamedResponse(business.plan(name))],
    ['POST', '/throw-after/:point', (_request, point) => throwAfterResponse(business, point)],
    ['POST', '/destroy', () => brokenResponse(business)],
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
    return serveFetch(handler);
  };
}
