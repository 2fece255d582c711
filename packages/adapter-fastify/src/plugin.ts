import { Transform } from 'node:stream';
import {
  createIdempotency,
  type Execution,
  type IdemError,
  type Idempotency,
  type IdempotencyOptions,
  UNSEEN_BODY,
} from '@idem/core';
import { clientGoneSignal, isResponseGone, settleOnResponse } from '@idem/node-http';
import type {
  FastifyPluginAsync,
  FastifyRequest,
  preHandlerAsyncHookHandler,
  preParsingHookHandler,
  RouteOptions,
} from 'fastify';
import fp from 'fastify-plugin';

/** Options a single route may override through `config: { idempotency: { … } }`. */
export type RouteIdempotencyOptions = Partial<Omit<IdempotencyOptions<FastifyRequest>, 'store'>>;

declare module 'fastify' {
  interface FastifyContextConfig {
    /** `false` turns idempotency off for this route; an object overrides the plugin's options. */
    idempotency?: false | RouteIdempotencyOptions;
  }
  interface FastifyRequest {
    /**
     * The execution of this request when it runs under a reserved key (undefined when not covered, without a
     * key, replayed or rejected): `request.idempotency?.finalizeWith(…)` finalizes inside your own transaction.
     */
    idempotency: Execution<FastifyRequest> | undefined;
  }
}

/** Options of {@link fastifyIdempotency}; the hooks (`redact`, `rebuildReplay`) receive the request as `host`. */
export interface FastifyIdempotencyOptions extends IdempotencyOptions<FastifyRequest> {
  /**
   * Who owns the key: return the authenticated principal (and tenant) so that one caller can never replay
   * another's response. @default every request shares one scope
   */
  readonly scope?: (request: FastifyRequest) => string | undefined;
  /** The JSON body of the coordinator's own answers. @default `{ error: { code, message } }` */
  readonly formatError?: (error: IdemError, request: FastifyRequest) => unknown;
}

/** The body bytes of a keyed request as they arrive, kept by the preParsing hook for the fingerprint. */
interface RawBody {
  readonly chunks: Buffer[];
  /** `true` once the whole body went through: a parser that hands the stream on leaves it unread. */
  complete: boolean;
}
const rawBodies = new WeakMap<FastifyRequest, RawBody>();

const asArray = <T>(hooks: T | T[] | undefined): T[] =>
  hooks === undefined ? [] : Array.isArray(hooks) ? hooks : [hooks];

const idempotencyPlugin: FastifyPluginAsync<FastifyIdempotencyOptions> = async (fastify, options) => {
  const base = createIdempotency<FastifyRequest>(options);
  fastify.decorateRequest('idempotency', undefined);

  /** The JSON text of an answer: the host's format, or the default when that throws or cannot be written. */
  const format = (error: IdemError, request: FastifyRequest): string => {
    if (options.formatError !== undefined) {
      try {
        return JSON.stringify(options.formatError(error, request));
      } catch {
        // a broken formatter must not turn a 409 into a 500
      }
    }
    return JSON.stringify(error.toJSON());
  };

  /** The hooks of one route, over the coordinator its options resolve to. */
  function hooksFor(idem: Idempotency<FastifyRequest>) {
    const header = idem.headerName;
    const waits = idem.waits;

    // Keep the bytes of a keyed request as they arrive: the fingerprint hashes them exactly.
    const keepRawBody: preParsingHookHandler = (request, _reply, payload, done) => {
      if (!idem.covers(request.method) || request.headers[header] === undefined) return done(null, payload);
      const { headers } = request;
      const declared = headers['transfer-encoding'] !== undefined || Number(headers['content-length']) > 0;
      if (!declared) return done(null, payload); // no body: nothing to keep
      const raw: RawBody = { chunks: [], complete: false };
      rawBodies.set(request, raw);
      const tee = new Transform({
        transform(chunk: Buffer, _encoding, callback) {
          raw.chunks.push(chunk);
          callback(null, chunk);
        },
        flush(callback) {
          raw.complete = true;
          callback();
        },
      });
      // Fastify compares this with Content-Length: the bytes that came off the wire, before any decoding.
      Object.defineProperty(tee, 'receivedEncodedLength', {
        get: () => (payload as { receivedEncodedLength?: number }).receivedEncodedLength,
      });
      // pipe, with the request's errors passed on by hand: they reach the parser instead of the process.
      // (pipeline would do that too, at the price of an AbortController and a DOMException per request.)
      payload.on('error', (error) => tee.destroy(error));
      done(null, payload.pipe(tee));
    };

    // preHandler: the body is parsed and validated, so invalid input never reaches the store.
    const begin: preHandlerAsyncHookHandler = async (request, reply) => {
      if (!idem.covers(request.method)) return;
      const url = request.url;
      const queryAt = url.indexOf('?');
      const raw = rawBodies.get(request);
      const result = await idem.begin({
        method: request.method,
        route: request.routeOptions.url ?? url,
        path: queryAt === -1 ? url : url.slice(0, queryAt),
        query: queryAt === -1 ? undefined : url.slice(queryAt + 1),
        // A body a parser handed on as a stream (an upload the handler reads itself) is not there yet: the
        // coordinator refuses to fingerprint it rather than hash what little has arrived.
        body: raw === undefined ? request.body : raw.complete ? Buffer.concat(raw.chunks) : UNSEEN_BODY,
        contentType: request.headers['content-type'],
        // Node joins a repeated header with ", "; a comma is never valid in a key, so that is rejected as is.
        key: request.headers[header],
        scope: options.scope?.(request),
        // Created only if the request has to wait behind another with its key.
        get signal() {
          return waits ? clientGoneSignal(reply.raw) : undefined;
        },
        host: request,
      });
      switch (result.action) {
        case 'proceed':
          return;
        case 'reject':
          return reply
            .code(result.error.status)
            .headers(result.error.headers)
            .type('application/json; charset=utf-8')
            .send(format(result.error, request));
        case 'replay':
          return reply
            .code(result.response.status)
            .headers(result.response.headers)
            .send(result.response.body ?? undefined);
        case 'execute': {
          const { execution } = result;
          if (isResponseGone(reply.raw)) {
            // The client left while the key was being reserved: free it, and run nothing for nobody.
            await execution.abort();
            reply.hijack();
            return;
          }
          request.idempotency = execution;
          settleOnResponse(execution, reply.raw);
        }
      }
    };
    return { keepRawBody, begin };
  }

  // Options are resolved once per route, where the route is defined, and only covered routes get hooks.
  fastify.addHook('onRoute', (route: RouteOptions) => {
    const config = route.config?.idempotency;
    if (config === false) return;
    const idem = config === undefined ? base : createIdempotency<FastifyRequest>({ ...options, ...config });
    const methods = asArray(route.method);
    if (!methods.some((method) => idem.covers(method))) return;
    const { keepRawBody, begin } = hooksFor(idem);
    route.preParsing = [...asArray(route.preParsing), keepRawBody];
    route.preHandler = [...asArray(route.preHandler), begin];
  });
};

/**
 * Fastify 5 plugin that makes covered requests idempotent by their `Idempotency-Key`. Register it before the
 * routes it covers. Per route, `config: { idempotency: false }` turns it off and `config: { idempotency: { … } }`
 * overrides options.
 *
 * @example
 * // request.user: set by your authentication hook, and declared for TypeScript:
 * // declare module 'fastify' { interface FastifyRequest { user?: { id: string } } }
 * await app.register(fastifyIdempotency, { store: createMemoryStore(), scope: (request) => request.user?.id });
 */
export const fastifyIdempotency = fp(idempotencyPlugin, { fastify: '5.x', name: '@idem/adapter-fastify' });
