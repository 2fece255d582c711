import { createIdempotency, type Execution } from '@idem/core';
import { settleWebResponse } from './capture.js';
import { describeWebRequest, pathAndQuery, readBody } from './describe.js';
import type { WebIdempotencyOptions } from './options.js';
import { answerWithout, startWebExecution } from './start.js';

/** Options of {@link withIdempotency}: the hooks receive the `Request` as `host`. */
export interface HandlerIdempotencyOptions extends WebIdempotencyOptions<Request> {
  /**
   * The route template the request identity includes (`/orders/:id`): a string for a handler that serves one
   * route, or a function of the request. @default the request's path
   */
  readonly route?: string | ((request: Request) => string);
}

const executions = new WeakMap<Request, Execution<Request>>();

/**
 * The execution a request runs under, inside a handler wrapped by {@link withIdempotency}: undefined when the
 * request is not covered, has no key, or was answered without running the handler. Its `finalizeWith` writes
 * the answer inside your own transaction.
 */
export function executionOf(request: Request): Execution<Request> | undefined {
  return executions.get(request);
}

/**
 * Make a Web-standard fetch handler idempotent by its requests' `Idempotency-Key`: a retry of a request that
 * was answered gets the same answer (`idempotent-replayed: true`) without running the handler again, on any
 * number of processes sharing the store. Runs wherever `Request` and `Response` do: Next.js route handlers,
 * `Bun.serve`, `Deno.serve`, Cloudflare Workers, Node.js with any fetch server.
 *
 * The handler gets the request with its body still unread (a keyed body's bytes are read from a clone, for
 * the fingerprint), and the arguments after it (a Next.js route's context, a Worker's env) as they came.
 *
 * @example
 * export const POST = withIdempotency(async (request) => Response.json(await createOrder(await request.json()), { status: 201 }), {
 *   store: createRedisStore(redis),
 *   scope: (request) => request.headers.get('x-user-id') ?? undefined,
 * });
 */
export function withIdempotency<Rest extends unknown[]>(
  handler: (request: Request, ...rest: Rest) => Response | Promise<Response>,
  options: HandlerIdempotencyOptions,
): (request: Request, ...rest: Rest) => Promise<Response> {
  const idem = createIdempotency<Request>(options);
  const { route } = options;
  const routeOf = (request: Request): string =>
    typeof route === 'function' ? route(request) : (route ?? pathAndQuery(request.url).path);
  return async (request, ...rest) => {
    if (!idem.covers(request.method)) return handler(request, ...rest);
    const body = await readBody(idem, request, () => request.clone().arrayBuffer());
    const parts = { route: routeOf(request), body, scope: options.scope?.(request), host: request };
    const result = await idem.begin(describeWebRequest(idem, request, parts));
    if (result.action === 'proceed') return handler(request, ...rest);
    if (result.action === 'reject' || result.action === 'replay')
      return answerWithout(result, request, options.formatError);
    const { execution } = result;
    if (!(await startWebExecution(execution, request))) return new Response(null, { status: 503 });
    executions.set(request, execution);
    try {
      return settleWebResponse(execution, await handler(request, ...rest), request.signal);
    } catch (error) {
      // The handler threw, or answered with what is no Response (or one whose body was read already).
      await execution.abort();
      throw error;
    }
  };
}
