import { type FastifyReply, type FastifyRequest, LogController } from 'fastify';
import fp from 'fastify-plugin';
import { logText } from './log-text.js';

/** Milliseconds as a log line shows them: at most two decimals (`20.65`, not `20.64887599999929`). */
export const roundMs = (ms: number): number => Math.round(ms * 100) / 100;

/** Why a request was refused: the `IcebergErrorResponse` it was answered with. */
interface Reason {
  readonly type: string;
  readonly message: string;
}

// On the request itself (decorated), as the idempotency adapter keeps its own state: one property write per
// request instead of WeakMap and WeakSet entries.
const REASON = Symbol('reference-server: why the request was refused');
const ARRIVED = Symbol('reference-server: when the request arrived');
const TOLD = Symbol('reference-server: the request line is out');
type Logged = FastifyRequest & { [REASON]?: Reason | undefined; [ARRIVED]?: number; [TOLD]?: boolean };

/**
 * What the request line tells besides Fastify's own: when each request arrived, the line of one aborted, and
 * the reason of every 4xx and 5xx answer, read from the error body that went out (any path: handlers, the
 * error handler, the idempotency layer's refusals, replays of a stored refusal).
 */
export const requestLog = fp(
  async (app) => {
    app.decorateRequest(REASON, undefined);
    app.decorateRequest(ARRIVED, undefined); // unset until this plugin's onRequest ran (an earlier hook may wait)
    app.decorateRequest(TOLD, false);
    app.addHook('onRequest', (request, _reply, done) => {
      (request as Logged)[ARRIVED] = performance.now();
      done();
    });
    // A request whose client went away (or that Node timed out with its own 408) before an answer went out
    // never completes: its line says so, instead of there being none.
    app.addHook('onRequestAbort', (request, done) => {
      const logged = request as Logged;
      if (logged[TOLD] === true) return done();
      logged[TOLD] = true;
      const ms = roundMs(performance.now() - (logged[ARRIVED] ?? performance.now()));
      const [method, url] = [logText(request.method), logText(request.url)];
      request.log.info(
        { method, url, aborted: true, responseTimeMs: ms },
        `${method} ${url} aborted after ${ms} ms (the client went away or its request timed out)`,
      );
      done();
    });
    app.addHook('onSend', (request, reply, payload, done) => {
      if (reply.statusCode < 400) return done(null, payload);
      const text =
        typeof payload === 'string'
          ? payload
          : Buffer.isBuffer(payload)
            ? payload.toString('utf8')
            : undefined;
      if (text !== undefined && text.length <= 64 * 1024) {
        try {
          const error = (JSON.parse(text) as { error?: { type?: unknown; message?: unknown } }).error;
          if (typeof error?.type === 'string' && typeof error.message === 'string')
            (request as Logged)[REASON] = { type: logText(error.type), message: logText(error.message) };
        } catch {}
      }
      done(null, payload);
    });
  },
  { fastify: '5.x', name: 'reference-server/request-log', dependencies: ['reference-server/observability'] },
);

/** The one line of a request: what a person reads, and the same facts as fields for a machine. */
export function requestLine(request: FastifyRequest, reply: FastifyReply) {
  const ms = roundMs(reply.elapsedTime);
  const method = logText(request.method);
  const url = logText(request.url);
  const status = reply.statusCode;
  const reason = (request as Logged)[REASON];
  const rawKey = request.headers['idempotency-key'];
  const key = typeof rawKey === 'string' ? logText(rawKey) : undefined;
  const replayed = reply.getHeader('idempotent-replayed') === 'true';
  let message = `${method} ${url} ${status} ${ms} ms`;
  if (key !== undefined) message += ` key ${key}${replayed ? ' replayed' : ''}`;
  if (reason !== undefined) message += ` ${reason.type}: ${reason.message}`;
  const fields = {
    method,
    url,
    statusCode: status,
    responseTimeMs: ms,
    ...(key === undefined ? {} : { idempotencyKey: key, replayed }),
    ...(reason === undefined ? {} : { errorType: reason.type, errorMessage: reason.message }),
  };
  return { fields, message };
}

/**
 * Fastify's request logging, one line per request instead of two (`incoming request`, `request completed`,
 * each with its request or response object): method, path, status, time in ms (two decimals), the key and
 * whether it was replayed, and a refusal's reason (error type and message). 5xx lines are errors, 4xx warnings
 * when the client may need to know (never: they are the client's), info otherwise.
 */
export class OneLineRequests extends LogController {
  override incomingRequest(): void {}

  override requestCompleted(
    error: Error | null | undefined,
    request: FastifyRequest,
    reply: FastifyReply,
  ): void {
    const logged = request as Logged;
    if (logged[TOLD] === true) return;
    logged[TOLD] = true;
    const level = error || reply.statusCode >= 500 ? 'error' : 'info';
    // Nothing to build for a level that is off (pino's loggers say; another logger is asked to log).
    if ((reply.log as { isLevelEnabled?: (name: string) => boolean }).isLevelEnabled?.(level) === false)
      return;
    const { fields, message } = requestLine(request, reply);
    if (error) reply.log.error({ ...fields, err: error }, message);
    else if (reply.statusCode >= 500) reply.log.error(fields, message);
    else reply.log.info(fields, message);
  }

  // The error handler answers every error itself (http/errors.ts) and logs the 5xx it meets; a 4xx's reason
  // is on its request line.
  override defaultErrorLog(): void {}

  override routeNotFound(): void {}
}
