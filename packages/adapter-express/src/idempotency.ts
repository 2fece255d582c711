import {
  createIdempotency,
  DEFAULT_MAX_BODY_BYTES,
  type IdemError,
  type IdempotencyOptions,
  type ReplayResponse,
} from '@idem/core';
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { captureResponse } from './capture-response.js';

export interface ExpressIdempotencyOptions extends IdempotencyOptions {
  /**
   * Who owns the key: return the authenticated principal (and tenant) so that one caller can never replay
   * another's response. @default every request shares one scope
   */
  readonly scope?: (req: Request) => string | undefined;
  /** The route identity for the fingerprint. @default `req.baseUrl + req.route.path`, else the path */
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

function sendReplay(res: Response, replay: ReplayResponse): void {
  res.statusCode = replay.status;
  for (const [name, value] of Object.entries(replay.headers)) res.setHeader(name, value);
  res.end(replay.body ?? undefined);
}

/**
 * Express 4 and 5 middleware that makes covered requests idempotent by their `Idempotency-Key`. Mount it after
 * the body parser (the fingerprint needs the body), on the app or on single routes.
 *
 * @example
 * app.use(express.json(), idempotency({ store: createMemoryStore(), scope: (req) => req.user?.id }));
 */
export function idempotency(options: ExpressIdempotencyOptions): RequestHandler {
  const idem = createIdempotency(options);
  const header = idem.headerName;
  const maxBodyBytes = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
  const routeOf = options.route ?? defaultRoute;
  const waits = options.inFlight?.strategy === 'wait';
  const format = options.formatError ?? ((error: IdemError) => error.toJSON());

  const reject = (error: IdemError, req: Request, res: Response, next: NextFunction): void => {
    if (options.errors === 'next') {
      next(error);
      return;
    }
    res.statusCode = error.status;
    for (const [name, value] of Object.entries(error.headers)) res.setHeader(name, value);
    res.setHeader('content-type', 'application/json; charset=utf-8');
    res.end(JSON.stringify(format(error, req)));
  };

  return (req, res, next) => {
    if (!idem.covers(req.method)) return next();
    let signal: AbortSignal | undefined;
    if (waits) {
      const controller = new AbortController();
      res.once('close', () => controller.abort());
      signal = controller.signal;
    }
    idem
      .begin({
        method: req.method,
        route: routeOf(req),
        query: req.query as Record<string, unknown>,
        body: req.body,
        contentType: req.headers['content-type'],
        // Node joins a repeated header with ", "; a comma is never valid in a key, so that is rejected as is.
        key: req.headers[header],
        scope: options.scope?.(req),
        signal,
      })
      .then((result) => {
        switch (result.action) {
          case 'proceed':
            return next();
          case 'reject':
            return reject(result.error, req, res, next);
          case 'replay':
            return sendReplay(res, result.response);
          case 'execute': {
            const { execution } = result;
            const snapshot = captureResponse(res, maxBodyBytes);
            let finished = false;
            res.once('finish', () => {
              finished = true;
              void execution.finish(snapshot());
            });
            // Closed before the response was complete: the client went away, release the key.
            res.once('close', () => {
              if (!finished) void execution.abort();
            });
            return next();
          }
        }
      }, next);
  };
}
