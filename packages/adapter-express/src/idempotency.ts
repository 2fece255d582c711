import type { IncomingMessage, ServerResponse } from 'node:http';
import { type BeginResult, createIdempotency, type Execution, errorResponse } from '@idem/core';
import type { NodeIdempotencyOptions } from '@idem/node-http';
import { bodyOfParsed, describeRequest, startExecution, writeResponse } from '@idem/node-http';
import type { NextFunction, Request, RequestHandler, Response } from 'express';

declare global {
  namespace Express {
    interface Request {
      /**
       * The execution of this request when it runs under a reserved key (undefined when not covered, without a
       * key, replayed or rejected): `req.idempotency?.finalizeWith(…)` finalizes inside your own transaction.
       */
      idempotency?: Execution<ExpressRequest>;
    }
  }
}

type ExpressRequest = Request;

/** Options of {@link idempotencyMiddleware}; the hooks (`redact`, `rebuildReplay`) receive `req` as `host`. */
export interface ExpressIdempotencyOptions extends NodeIdempotencyOptions<Request> {
  /** The route template for the fingerprint. @default `req.baseUrl + req.route.path`, else the path */
  readonly route?: (req: Request) => string;
  /** `'respond'` answers 400/409/422/503 itself; `'next'` passes the typed error to `next(err)`. @default 'respond' */
  readonly errors?: 'respond' | 'next';
}

function defaultRoute(req: Request): string {
  const path = (req.route as { path?: unknown } | undefined)?.path;
  return typeof path === 'string' ? req.baseUrl + path : req.baseUrl + req.path;
}

/**
 * The body bytes as received, when a body parser kept them (see {@link captureRawBody}); else the parsed body.
 * Raw bytes are the exact identity: a parsed body has lost what doubles cannot hold (`1e400`, big integers).
 */
function bodyOf(req: Request): unknown {
  return bodyOfParsed(req.headers, req.readableEnded, (req as { rawBody?: unknown }).rawBody, req.body);
}

/**
 * A `verify` function for Express's body parsers that keeps the raw bytes on `req.rawBody`, so that the
 * fingerprint hashes exactly what the client sent.
 *
 * @example
 * app.use(express.json({ verify: captureRawBody }), idempotencyMiddleware({ store }));
 */
export function captureRawBody(req: IncomingMessage, _res: ServerResponse, buffer: Buffer): void {
  (req as IncomingMessage & { rawBody?: Buffer }).rawBody = buffer;
}

/**
 * Express 4 and 5 middleware that makes covered requests idempotent by their `Idempotency-Key`. Mount it after
 * the body parser (the fingerprint needs the body; give the parser `verify: captureRawBody` for exact
 * numbers; a keyed request whose body no parser read is answered 415 `IDEMPOTENCY_BODY_UNSEEN`) and after any
 * compression middleware (then plain bytes are stored and compressed per replay), on the app or on single
 * routes.
 *
 * @example
 * // req.user: set by your authentication middleware, and declared for TypeScript:
 * // declare global { namespace Express { interface Request { user?: { id: string } } } }
 * app.use(express.json({ verify: captureRawBody }), idempotencyMiddleware({ store, scope: (req) => req.user?.id }));
 */
export function idempotencyMiddleware(options: ExpressIdempotencyOptions): RequestHandler {
  const idem = createIdempotency<Request>(options);
  const routeOf = options.route ?? defaultRoute;
  return (req, res, next) => {
    if (!idem.covers(req.method)) return next();
    const { method, originalUrl: url, headers } = req;
    const route = routeOf(req);
    const parts = { method, url, headers, route, body: bodyOf(req), scope: options.scope?.(req), host: req };
    // `begin` answers synchronously for a synchronous store: then nothing here waits for a promise.
    const begun = idem.begin(describeRequest(idem, res, parts));
    if (begun instanceof Promise) begun.then((result) => act(result, req, res, next)).catch(next);
    else act(begun, req, res, next);
  };

  /** Act on what `begin` answered: send a refusal or a replay, or run the next handlers under the key. */
  function act(result: BeginResult<Request>, req: Request, res: Response, next: NextFunction): void {
    switch (result.action) {
      case 'proceed':
        next();
        return;
      case 'reject':
        if (options.errors === 'next') next(result.error);
        else writeResponse(res, errorResponse(result.error, req, options.formatError));
        return;
      case 'replay':
        writeResponse(res, result.response);
        return;
      case 'execute':
      case 'reserve-in-transaction': {
        const started = startExecution(result.execution, res);
        if (started === true) {
          req.idempotency = result.execution;
          next();
        } else {
          started.catch(next); // the client left: the key is being released, and nothing runs
        }
      }
    }
  }
}
