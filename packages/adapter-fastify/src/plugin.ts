import type { Execution, IdempotencyOverrides, ReplayResponse } from '@idem/core';
import { createIdempotency } from '@idem/core';
import type { NodeIdempotencyOptions } from '@idem/node-http';
import { describeRequest, errorResponse, KeptBodies, replyWith, startExecution } from '@idem/node-http';
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
    /** Its execution under a reserved key (else undefined): `finalizeWith` finalizes in your own transaction. */
    idempotency: Execution<FastifyRequest> | undefined;
  }
}

/** Options of {@link fastifyIdempotency}; the hooks (`redact`, `rebuildReplay`) receive the request as `host`. */
export interface FastifyIdempotencyOptions extends NodeIdempotencyOptions<FastifyRequest> {}

/** A route's hooks of one kind (none, one or several, as Fastify takes them), with `hook` after them. */
const append = <T>(hooks: T | T[] | undefined, hook: T): T[] => [hooks ?? [], hook].flat() as T[];

const idempotencyPlugin: FastifyPluginAsync<FastifyIdempotencyOptions> = async (fastify, options) => {
  const base = createIdempotency<FastifyRequest>(options);
  fastify.decorateRequest('idempotency', undefined);
  const bodies = new KeptBodies<FastifyRequest>();
  const { onProtoPoisoning = 'error', onConstructorPoisoning = 'error' } = fastify.initialConfig;
  const parse = fastify.getDefaultJsonParser(onProtoPoisoning, onConstructorPoisoning);
  // Fastify's JSON parser keeps the text it reads; an app's own JSON parser stays, its bodies teed (preParsing).
  try {
    fastify.addContentTypeParser('application/json', { parseAs: 'string' }, (request, text, done) =>
      parse(request, bodies.text(request, text as string), done),
    );
    bodies.keepText();
  } catch (error) {
    if ((error as { code?: unknown }).code !== 'FST_ERR_CTP_ALREADY_PRESENT') throw error;
  }

  // Options are resolved once per route, where the route is defined, and only covered routes get hooks.
  fastify.addHook('onRoute', (routeOptions: RouteOptions) => {
    const config = routeOptions.config?.idempotency;
    if (config === false) return;
    const idem = config === undefined ? base : base.with(config); // its options, the plugin's timers
    if (![routeOptions.method].flat().some((method) => idem.covers(method))) return;
    // Keep a keyed body as it arrives, unless the JSON parser keeps its text: the fingerprint hashes it exactly.
    routeOptions.preParsing = append(routeOptions.preParsing, (request, _reply, payload, done) =>
      done(null, bodies.tee(idem, request, payload)),
    );
    // preHandler: the body is parsed and validated, so invalid input never reaches the store.
    routeOptions.preHandler = append(routeOptions.preHandler, async (request, reply) => {
      if (!idem.covers(request.method)) return;
      const { method, url, headers } = request;
      const route = request.routeOptions.url ?? url;
      const body = bodies.of(request, request.body);
      const parts = { method, url, headers, route, body, scope: options.scope?.(request), host: request };
      const result = await idem.begin(describeRequest(idem, reply.raw, parts));
      switch (result.action) {
        case 'proceed':
          return;
        case 'reject':
          return replyWith(reply, errorResponse(result.error, request, options.formatError));
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

/** Replay a stored answer through `reply` as the plugin does: for an app handed a replay in its own transaction. */
export const sendReplay: (reply: FastifyReply, response: ReplayResponse) => FastifyReply = replyWith;
