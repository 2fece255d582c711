import type { Execution, IdempotencyOverrides, ReplayResponse } from '@idem/core';
import { createIdempotency } from '@idem/core';
import type { KeptBody, NodeIdempotencyOptions } from '@idem/node-http';
import { describeRequest, errorResponse, keepBody, startExecution } from '@idem/node-http';
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
    /**
     * The execution of this request when it runs under a reserved key (undefined when not covered, without a
     * key, replayed or rejected): `request.idempotency?.finalizeWith(…)` finalizes inside your own transaction.
     */
    idempotency: Execution<FastifyRequest> | undefined;
  }
}

/** Options of {@link fastifyIdempotency}; the hooks (`redact`, `rebuildReplay`) receive the request as `host`. */
export interface FastifyIdempotencyOptions extends NodeIdempotencyOptions<FastifyRequest> {}

const keptBodies = new WeakMap<FastifyRequest, KeptBody>();
/** A route's hooks of one kind (none, one or several, as Fastify takes them), with `hook` after them. */
const append = <T>(hooks: T | T[] | undefined, hook: T): T[] =>
  hooks === undefined ? [hook] : Array.isArray(hooks) ? [...hooks, hook] : [hooks, hook];

const idempotencyPlugin: FastifyPluginAsync<FastifyIdempotencyOptions> = async (fastify, options) => {
  const base = createIdempotency<FastifyRequest>(options);
  fastify.decorateRequest('idempotency', undefined);

  // Options are resolved once per route, where the route is defined, and only covered routes get hooks.
  fastify.addHook('onRoute', (routeOptions: RouteOptions) => {
    const config = routeOptions.config?.idempotency;
    if (config === false) return;
    const idem = config === undefined ? base : base.with(config); // its options, the plugin's timers
    if (![routeOptions.method].flat().some((method) => idem.covers(method))) return;
    // Keep the bytes of a keyed request with a body as they arrive: the fingerprint hashes them exactly.
    routeOptions.preParsing = append(routeOptions.preParsing, (request, _reply, payload, done) => {
      const kept = keepBody(idem, request, payload);
      if (kept !== undefined) keptBodies.set(request, kept);
      done(null, kept?.stream ?? payload);
    });
    // preHandler: the body is parsed and validated, so invalid input never reaches the store.
    routeOptions.preHandler = append(routeOptions.preHandler, async (request, reply) => {
      if (!idem.covers(request.method)) return;
      const { method, url, headers } = request;
      const route = request.routeOptions.url ?? url;
      const body = keptBodies.get(request)?.bytes() ?? request.body;
      const parts = { method, url, headers, route, body, scope: options.scope?.(request), host: request };
      const result = await idem.begin(describeRequest(idem, reply.raw, parts));
      switch (result.action) {
        case 'proceed':
          return;
        case 'reject': {
          const { status, headers, body } = errorResponse(result.error, request, options.formatError);
          return reply.code(status).headers(headers).send(body);
        }
        case 'replay':
          return sendReplay(reply, result.response);
        case 'execute':
        case 'reserve-in-transaction':
          if (await startExecution(result.execution, reply.raw)) request.idempotency = result.execution;
          else reply.hijack(); // the client left while the key was being reserved: nothing runs
      }
    });
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

/**
 * Replay a stored answer through `reply` as the plugin does: its status, its headers
 * (`idempotent-replayed: true` among them) and its body. For an app that reserves or finalizes in its own
 * transaction and is handed a replay there.
 */
export function sendReplay(reply: FastifyReply, response: ReplayResponse): FastifyReply {
  const { status, headers } = response;
  const body = response.body ?? undefined; // no body: send(null) would serialize `null`
  return reply.code(status).headers(headers).send(body);
}
