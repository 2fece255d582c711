import { Transform } from 'node:stream';
import {
  createIdempotency,
  DEFAULT_MAX_BODY_BYTES,
  type Execution,
  type IdemError,
  type Idempotency,
  type IdempotencyOptions,
} from '@idem/core';
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';

/** Options a single route may override through `config: { idempotency: { … } }`. */
export type RouteIdempotencyOptions = Partial<Omit<IdempotencyOptions, 'store'>>;

declare module 'fastify' {
  interface FastifyContextConfig {
    /** `false` turns idempotency off for this route; an object overrides the plugin's options. */
    idempotency?: false | RouteIdempotencyOptions;
  }
}

export interface FastifyIdempotencyOptions extends IdempotencyOptions {
  /**
   * Who owns the key: return the authenticated principal (and tenant) so that one caller can never replay
   * another's response. @default every request shares one scope
   */
  readonly scope?: (request: FastifyRequest) => string | undefined;
  /** The JSON body of the coordinator's own answers. @default `{ error: { code, message } }` */
  readonly formatError?: (error: IdemError, request: FastifyRequest) => unknown;
}

/** What one executing request carries from preHandler to onResponse. */
interface Capture {
  readonly execution: Execution;
  body: Buffer | string | null;
  truncated: boolean;
}

// Module-level: a request belongs to one plugin instance anyway, and executionOf() needs to reach it.
const captures = new WeakMap<FastifyRequest, Capture>();

/**
 * The execution of a request the plugin reserved, for hosts that finalize inside their own transaction:
 * `prepare` the response, finalize with its `owner`, then `markFinalized`. Undefined when the request is not
 * executing under a key (not covered, no key, replayed, rejected).
 */
export function executionOf(request: FastifyRequest): Execution | undefined {
  return captures.get(request)?.execution;
}

const isReadable = (payload: unknown): payload is NodeJS.ReadableStream =>
  typeof payload === 'object' &&
  payload !== null &&
  typeof (payload as { pipe?: unknown }).pipe === 'function';

/** Aborted when the connection closes before the response is sent: a waiting request stops waiting. */
function closeSignal(reply: FastifyReply): AbortSignal {
  const controller = new AbortController();
  reply.raw.once('close', () => controller.abort());
  return controller.signal;
}

const idempotencyPlugin: FastifyPluginAsync<FastifyIdempotencyOptions> = async (fastify, options) => {
  const base = createIdempotency(options);
  const maxBodyBytes = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
  const format = options.formatError ?? ((error: IdemError) => error.toJSON());
  const perRoute = new WeakMap<RouteIdempotencyOptions, Idempotency>();
  const waits = options.inFlight?.strategy === 'wait';

  const coordinatorFor = (config: RouteIdempotencyOptions | false | undefined): Idempotency | undefined => {
    if (config === undefined) return base;
    if (config === false) return undefined;
    let idem = perRoute.get(config);
    if (idem === undefined) {
      idem = createIdempotency({ ...options, ...config });
      perRoute.set(config, idem);
    }
    return idem;
  };

  const reject = (error: IdemError, request: FastifyRequest, reply: FastifyReply) =>
    reply
      .code(error.status)
      .headers(error.headers)
      .type('application/json; charset=utf-8')
      .send(JSON.stringify(format(error, request)));

  // preHandler: the body is parsed and validated, so invalid input never reaches the store.
  fastify.addHook('preHandler', async (request, reply) => {
    // routeOptions is a getter that builds a new object: read it once.
    const route = request.routeOptions;
    const idem = coordinatorFor(route.config?.idempotency);
    if (idem === undefined || !idem.covers(request.method)) return;
    const header = idem.headerName;
    const result = await idem.begin({
      method: request.method,
      route: route.url ?? request.url,
      query: request.query as Record<string, unknown>,
      body: request.body,
      contentType: request.headers['content-type'],
      // Node joins a repeated header with ", "; a comma is never valid in a key, so that is rejected as is.
      key: request.headers[header],
      scope: options.scope?.(request),
      signal: waits ? closeSignal(reply) : undefined,
    });
    switch (result.action) {
      case 'proceed':
        return;
      case 'reject':
        return reject(result.error, request, reply);
      case 'replay':
        return reply
          .code(result.response.status)
          .headers(result.response.headers)
          .send(result.response.body ?? undefined);
      case 'execute': {
        const { execution } = result;
        captures.set(request, { execution, body: null, truncated: false });
        // Closed before the response was complete: the client went away, release the key. (Fastify's
        // onRequestAbort only sees an abort while the request body is still being read.)
        reply.raw.once('close', () => {
          if (!reply.raw.writableFinished) void execution.abort();
        });
      }
    }
  });

  // Callback-style hooks: no promise per request where nothing needs awaiting.
  fastify.addHook('onSend', (request, _reply, payload, done) => {
    const capture = captures.get(request);
    if (capture === undefined) return done(null, payload);
    if (typeof payload === 'string' || Buffer.isBuffer(payload)) {
      const size = typeof payload === 'string' ? Buffer.byteLength(payload) : payload.length;
      if (size > maxBodyBytes) capture.truncated = true;
      else capture.body = payload;
      return done(null, payload);
    }
    if (!isReadable(payload)) return done(null, payload);
    // A stream: pass it through untouched, keeping a copy up to the cap.
    const chunks: Buffer[] = [];
    let size = 0;
    const tee = new Transform({
      transform(chunk: Buffer | string, encoding, callback) {
        if (!capture.truncated) {
          const buffer = typeof chunk === 'string' ? Buffer.from(chunk, encoding) : chunk;
          size += buffer.length;
          if (size > maxBodyBytes) {
            capture.truncated = true;
            chunks.length = 0;
          } else {
            chunks.push(buffer);
          }
        }
        callback(null, chunk);
      },
      flush(callback) {
        if (!capture.truncated) capture.body = Buffer.concat(chunks);
        callback();
      },
    });
    done(null, payload.pipe(tee));
  });

  fastify.addHook('onResponse', (request, reply, done) => {
    const capture = captures.get(request);
    if (capture === undefined) return done();
    // finish never throws; the response has gone out already, so nothing waits for it.
    void capture.execution.finish({
      status: reply.statusCode,
      headers: reply.getHeaders(),
      body: capture.body,
      bodyTruncated: capture.truncated,
    });
    done();
  });
};

/**
 * Fastify 5 plugin that makes covered requests idempotent by their `Idempotency-Key`. Per route,
 * `config: { idempotency: false }` turns it off and `config: { idempotency: { … } }` overrides options.
 *
 * @example
 * await app.register(idempotency, { store: createMemoryStore(), scope: (request) => request.user?.id });
 */
export const idempotency = fp(idempotencyPlugin, { fastify: '5.x', name: '@idem/adapter-fastify' });
export default idempotency;
