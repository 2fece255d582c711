import type { BeginResult, Execution, IdempotencyOverrides } from '@idem/core';
import { createIdempotency, errorResponse, type WholeResponse } from '@idem/core';
import type { KeptBody, NodeIdempotencyOptions } from '@idem/node-http';
import {
  decorateSettlement,
  describeRequest,
  handOver,
  isResponseGone,
  keepBody,
  settleOnReply,
} from '@idem/node-http';
import type { FastifyPluginAsync, FastifyReply, FastifyRequest, RouteOptions } from 'fastify';
import fp from 'fastify-plugin';

/** Options a single route may override through `config: { idempotency: { … } }`. */
export type RouteIdempotencyOptions = IdempotencyOverrides<FastifyRequest>;

declare module 'fastify' {
  interface FastifyContextConfig {
    /** `false` turns idempotency off for this route; an object overrides the plugin's options. */
    idempotency?: false | RouteIdempotencyOptions;
  }
  interface FastifyRequest {
    /** The execution of this request under its reserved key, else undefined: `request.idempotency?.finalizeWith(…)`. */
    idempotency: Execution<FastifyRequest> | undefined;
  }
}

/** Options of {@link fastifyIdempotency}; the hooks (`redact`, `rebuildReplay`) receive the request as `host`. */
export interface FastifyIdempotencyOptions extends NodeIdempotencyOptions<FastifyRequest> {}

// On the request itself (decorated): kept in a WeakMap keyed by it, every request outlived the young generation.
const KEPT = Symbol('@idem/adapter-fastify kept body');
type Kept = FastifyRequest & { [KEPT]?: KeptBody | undefined };
/** A hook's callback: the next hook, or Fastify's error answer. */
type Done = (error?: Error) => void;
/** A route's hooks of one kind (none, one or several, as Fastify takes them), with `hook` after them. */
const append = <T>(hooks: T | T[] | undefined, hook: T): T[] => [...[hooks ?? []].flat(), hook] as T[];

const idempotencyPlugin: FastifyPluginAsync<FastifyIdempotencyOptions> = async (fastify, options) => {
  const base = createIdempotency<FastifyRequest>(options);
  for (const name of ['idempotency', KEPT]) fastify.decorateRequest(name, undefined);
  decorateSettlement(fastify);
  // Options are resolved once per route, where the route is defined, and only covered routes get hooks.
  fastify.addHook('onRoute', (routeOptions: RouteOptions) => {
    const config = routeOptions.config?.idempotency;
    if (config === false) return;
    const idem = config === undefined ? base : base.with(config); // its options, the plugin's timers
    if (![routeOptions.method].flat().some((method) => idem.covers(method))) return;
    const route = routeOptions.url; // (request.routeOptions builds a new object on every read)
    // Keep the bytes of a keyed request with a body as they arrive: the fingerprint hashes them exactly.
    routeOptions.preParsing = append(routeOptions.preParsing, (request, _reply, payload, done) => {
      const kept = keepBody(idem, request, payload);
      (request as Kept)[KEPT] = kept;
      done(null, kept?.stream ?? payload);
    });
    // The answer as Fastify hands it over, last of the onSend hooks: `done` writes it (a whole body at once).
    routeOptions.onSend = append(routeOptions.onSend, handOver);
    // preHandler: the body is parsed and validated, so invalid input never reaches the store. Callback style:
    // `begin` answers synchronously for a synchronous store, and then nothing here waits for a promise.
    routeOptions.preHandler = append(routeOptions.preHandler, (request, reply, done) => {
      if (!idem.covers(request.method)) return done();
      const { method, url, headers } = request;
      const body = (request as Kept)[KEPT]?.bytes() ?? request.body;
      const parts = { method, url, headers, route, body, scope: options.scope?.(request), host: request };
      const result = idem.begin(describeRequest(idem, reply.raw, parts));
      if (result instanceof Promise) result.then((begun) => act(begun, request, reply, done)).catch(done);
      else act(result, request, reply, done);
    });
  });

  /** Act on what `begin` answered: send a refusal or a replay, or run the handler under the key. */
  function act(
    result: BeginResult<FastifyRequest>,
    request: FastifyRequest,
    reply: FastifyReply,
    done: Done,
  ): void {
    switch (result.action) {
      case 'proceed':
        done();
        return;
      case 'reject':
        sendReplay(reply, errorResponse(result.error, request, options.formatError));
        return;
      case 'replay':
        sendReplay(reply, result.response);
        return;
      case 'execute':
      case 'reserve-in-transaction': {
        const { execution } = result;
        if (isResponseGone(reply.raw)) {
          // The client left meanwhile: nothing runs.
          execution.abort().then(() => reply.hijack(), done);
          return;
        }
        // Taken as Fastify hands it over; a hijacked reply, as the app writes it.
        settleOnReply(execution, reply);
        request.idempotency = execution;
        done();
      }
    }
  }
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

/**
 * Send a whole answer through `reply` as the plugin does, such as a replay (`idempotent-replayed: true`) that an
 * app reserving in its own transaction is handed there.
 */
export function sendReplay(reply: FastifyReply, response: WholeResponse): FastifyReply {
  const { status, headers, body } = response;
  // Bytes, which Fastify sends as they are: a string would go through a serializer the app set on the reply
  // (`reply.serializer`), and a JSON error body would be encoded twice. No body: send(null) would send `null`.
  return reply
    .code(status)
    .headers(headers)
    .send(typeof body === 'string' ? Buffer.from(body) : (body ?? undefined));
}
