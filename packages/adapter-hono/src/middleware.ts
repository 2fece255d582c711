import {
  createIdempotency,
  type Execution,
  type Idempotency,
  type IdempotencyOverrides,
  UNSEEN_BODY,
} from '@idem/core';
import {
  answerWithout,
  describeWebRequest,
  readBody,
  settleWebResponse,
  startWebExecution,
  type WebIdempotencyOptions,
} from '@idem/web';
import type { Context, MiddlewareHandler } from 'hono';
import { matchedRoutes } from 'hono/route';

/** What the middleware sets on the context: `c.get('idempotency')`. */
export interface IdempotencyVariables {
  /** The execution of this request under its reserved key, else undefined: `c.get('idempotency')?.finalizeWith(…)`. */
  idempotency: Execution<Context> | undefined;
}

/** The environment the middleware adds to an app's: `new Hono<IdempotencyEnv>()`, or merged into yours. */
export interface IdempotencyEnv {
  Variables: IdempotencyVariables;
}

/** Options of {@link idempotency}; the hooks (`scope`, `formatError`, `redact`, `rebuildReplay`) receive the context. */
export interface HonoIdempotencyOptions extends WebIdempotencyOptions<Context> {}

/** Options one route may override with {@link IdempotencyMiddleware.with}. */
export type RouteIdempotencyOptions = IdempotencyOverrides<Context>;

/** The middleware, and the same middleware with a route's own options. */
export interface IdempotencyMiddleware extends MiddlewareHandler<IdempotencyEnv> {
  /**
   * This middleware with a route's overrides (`lifetimeMs`, `statuses`, `enabled: false` …), over the same
   * store and timers: `app.post('/payments', idem.with({ lifetimeMs: 86_400_000 }), handler)`.
   */
  with(overrides: RouteIdempotencyOptions): MiddlewareHandler<IdempotencyEnv>;
}

/** Requests one of the middlewares has taken: a second one on the same route (app-wide and per route) passes. */
const taken = new WeakSet<Request>();

/**
 * The route template of the handler that answers (`/orders/:id`): the first matched route after this
 * middleware that is a handler (registered for a method, or taking no `next`), else the path.
 */
function routeOf(c: Context): string {
  const routes = matchedRoutes(c);
  for (let i = c.req.routeIndex + 1; i < routes.length; i++) {
    const route = routes[i];
    if (route !== undefined && (route.method !== 'ALL' || route.handler.length < 2)) return route.path;
  }
  return c.req.path;
}

const decoder = new TextDecoder();

/**
 * The body's bytes as sent, through Hono's cached reader, so that the handler reads them again
 * (`c.req.arrayBuffer()` gives these very bytes). Its text is cached beside them, decoded as `text()` decodes
 * (UTF-8, a BOM dropped): `c.req.json()` and `c.req.text()` then reuse it, where Hono would otherwise make a
 * whole `Response` of the bytes to decode them.
 */
async function bytesOf(c: Context): Promise<ArrayBuffer> {
  const bytes = await c.req.arrayBuffer();
  // Hono keeps each read as its promise (typed otherwise): only where it does is the text put beside it.
  const cache = c.req.bodyCache as Record<string, unknown>;
  if (cache.arrayBuffer instanceof Promise && cache.text === undefined)
    cache.text = Promise.resolve(decoder.decode(bytes));
  return bytes;
}

/**
 * The body as `begin` takes it: its bytes as sent, or, when an earlier middleware read it through Hono's
 * reader and only what that kept is left (the request's own body is consumed), what it kept, as it kept it:
 * a `Blob` of the bytes, the text as received, the parsed JSON value, or the `FormData` (hashed as its
 * entries). Never the bytes Hono would make again from those (`c.req.arrayBuffer()` encodes a `FormData` anew,
 * under a random multipart boundary: the same retry would read as another request). What else Hono may keep
 * is `UNSEEN_BODY`.
 */
async function bodyOf(c: Context): Promise<unknown> {
  const cache = c.req.bodyCache as Record<string, unknown>;
  if (cache.arrayBuffer !== undefined) return bytesOf(c);
  for (const kept of ['blob', 'text', 'json', 'formData']) {
    if (cache[kept] === undefined) continue;
    const body: unknown = await cache[kept];
    // A JSON `null` is a body (`begin` reads a null body as none): its text, which hashes as the bytes would.
    return kept === 'json' && body === null ? 'null' : body;
  }
  return Object.keys(cache).length === 0 ? bytesOf(c) : UNSEEN_BODY;
}

/**
 * Hono middleware that makes covered requests (POST, PUT, PATCH and DELETE by default) idempotent by their
 * `Idempotency-Key`, on Web-standard `Request` and `Response` only: the body's bytes from Hono's cached body
 * reader (the handler reads it again through `c.req.json()`, `text()`, `parseBody()` or a validator), the
 * answer captured from the `Response` the handler returns as it goes out (a streamed body is passed through
 * and captured up to the cap), and the client-gone signal from the request's `AbortSignal`. Use it app-wide
 * (`app.use(idem)`, or on a path) or per route; `except` from `hono/combine` leaves routes out.
 *
 * @example
 * const idem = idempotency({ store: createMemoryStore(), scope: (c) => c.get('user')?.id });
 * app.use('/api/*', idem);
 * app.post('/api/orders', async (c) => c.json(await createOrder(await c.req.json()), 201));
 */
export function idempotency(options: HonoIdempotencyOptions): IdempotencyMiddleware {
  const base = createIdempotency<Context>(options);
  const middleware =
    (idem: Idempotency<Context>): MiddlewareHandler<IdempotencyEnv> =>
    async (c, next) => {
      const request = c.req.raw;
      if (!idem.covers(request.method) || taken.has(request)) return next();
      taken.add(request);
      const body = await readBody(idem, request, () => bodyOf(c));
      const parts = { route: routeOf(c), body, scope: options.scope?.(c), host: c };
      const result = await idem.begin(describeWebRequest(idem, request, parts));
      if (result.action === 'proceed') return next();
      if (result.action === 'reject' || result.action === 'replay')
        return answerWithout(result, c, options.formatError);
      const { execution } = result;
      if (!(await startWebExecution(execution, request))) return new Response(null, { status: 503 });
      c.set('idempotency', execution);
      try {
        // A handler's Error is answered inside (`app.onError`, 500 by default): that answer settles the key.
        await next();
        if (!c.finalized) {
          // Nothing answered (a later middleware or a handler that returned nothing): Hono fails the request
          // ("Context is not finalized", its error handler's 500). No answer was given, so none is stored: the
          // key is released as for a thrown handler. (Reading `c.res` here would make up an empty 200.)
          await execution.abort();
          return;
        }
        const settled = settleWebResponse(execution, c.res, request.signal);
        // Set only when it is another response: Hono's setter rebuilds the response it is given.
        if (settled !== c.res) c.res = settled;
      } catch (error) {
        // Thrown past Hono's onError (not an Error, or onError rethrew), or a response that cannot be sent.
        await execution.abort();
        throw error;
      }
    };
  return Object.assign(middleware(base), {
    with: (overrides: RouteIdempotencyOptions) => middleware(base.with(overrides)),
  });
}
