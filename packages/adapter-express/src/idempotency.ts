import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  createIdempotency,
  type Execution,
  type IdemError,
  type IdempotencyOptions,
  type ReplayResponse,
  UNSEEN_BODY,
} from '@idem/core';
import { clientGoneSignal, isResponseGone, settleOnResponse } from '@idem/node-http';
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
export interface ExpressIdempotencyOptions extends IdempotencyOptions<Request> {
  /**
   * Who owns the key: return the authenticated principal (and tenant) so that one caller can never replay
   * another's response. @default every request shares one scope
   */
  readonly scope?: (req: Request) => string | undefined;
  /** The route template for the fingerprint. @default `req.baseUrl + req.route.path`, else the path */
  readonly route?: (req: Request) => string;
  /** `'respond'` answers 400/409/422/503 itself; `'next'` passes the typed error to `next(err)`. @default 'respond' */
  readonly errors?: 'respond' | 'next';
  /** The JSON body of the coordinator's own answers. @default `{ error: { code, message } }` */
  readonly formatError?: (error: IdemError, req: Request) => unknown;
}

function defaultRoute(req: Request): string {
  const path = (req.route as { path?: unknown } | undefined)?.path;
  return typeof path === 'string' ? req.baseUrl + path : req.baseUrl + req.path;
}

/**
 * The body bytes as received, when a body parser kept them (see {@link captureRawBody}); else the parsed body.
 * Raw bytes are the exact identity: a parsed body has lost what doubles cannot hold (`1e400`, big integers).
 * A body that is there but that no parser read (a handler that streams the upload itself) is unseen: the
 * coordinator refuses to fingerprint it rather than hash it as no body.
 */
function bodyOf(req: Request): unknown {
  const raw = (req as { rawBody?: unknown }).rawBody;
  if (Buffer.isBuffer(raw) || typeof raw === 'string') return raw;
  const declared =
    req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length']) > 0;
  // Express 4's JSON parser sets `req.body = {}` even for a body it does not parse: only a body that was
  // read to its end is the one the parser saw.
  if (declared && !(req.readableEnded && req.body !== undefined)) return UNSEEN_BODY;
  return req.body;
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

function sendReplay(res: Response, replay: ReplayResponse): void {
  res.statusCode = replay.status;
  for (const [name, value] of Object.entries(replay.headers)) res.setHeader(name, value);
  res.end(replay.body ?? undefined);
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
  const header = idem.headerName;
  const routeOf = options.route ?? defaultRoute;

  /** The JSON text of an answer: the host's format, or the default when that throws or cannot be written. */
  const body = (error: IdemError, req: Request): string => {
    if (options.formatError !== undefined) {
      try {
        return JSON.stringify(options.formatError(error, req));
      } catch {
        // a broken formatter must not turn a 409 into a crash
      }
    }
    return JSON.stringify(error.toJSON());
  };

  const reject = (error: IdemError, req: Request, res: Response, next: NextFunction): void => {
    if (options.errors === 'next') {
      next(error);
      return;
    }
    res.statusCode = error.status;
    for (const [name, value] of Object.entries(error.headers)) res.setHeader(name, value);
    res.setHeader('content-type', 'application/json; charset=utf-8');
    res.end(body(error, req));
  };

  return (req, res, next) => {
    if (!idem.covers(req.method)) return next();
    const url = req.originalUrl;
    const queryAt = url.indexOf('?');
    idem
      .begin({
        method: req.method,
        route: routeOf(req),
        path: queryAt === -1 ? url : url.slice(0, queryAt),
        query: queryAt === -1 ? undefined : url.slice(queryAt + 1),
        body: bodyOf(req),
        contentType: req.headers['content-type'],
        // Node joins a repeated header with ", "; a comma is never valid in a key, so that is rejected as is.
        key: req.headers[header],
        scope: options.scope?.(req),
        // Created only if the request has to wait behind another with its key.
        get signal() {
          return idem.waits ? clientGoneSignal(res) : undefined;
        },
        host: req,
      })
      .then((result) => {
        switch (result.action) {
          case 'proceed':
            return next();
          case 'reject':
            return reject(result.error, req, res, next);
          case 'replay':
            return sendReplay(res, result.response);
          case 'execute':
            // The client left while the key was being reserved: free it, and run nothing for nobody.
            if (isResponseGone(res)) return void result.execution.abort();
            req.idempotency = result.execution;
            settleOnResponse(result.execution, res);
            return next();
        }
      })
      .catch(next);
  };
}
