import { idempotency } from '@idem/adapter-fastify';
import type { IdemError, StoredResponse } from '@idem/core';
import Fastify, { type FastifyInstance, type FastifyRequest } from 'fastify';
import { getEntityByUuid } from './catalog/repository.js';
import type { ServerConfig } from './config.js';
import type { CatalogDatabase } from './db.js';
import { IcebergError, notAuthorized } from './errors.js';
import { catalogRoutes, ENDPOINTS } from './routes/catalog-routes.js';
import { viewRoutes } from './routes/view-routes.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** Who sent the request: the principal of its bearer token, or `anonymous`. */
    principal: string;
  }
}

const ERROR_TYPES: Record<number, string> = {
  400: 'BadRequestException',
  409: 'CommitFailedException',
  503: 'ServiceUnavailableException',
};

/** Table and view config handed to clients with every load result (storage settings, credentials). */
const tableConfig = (): Record<string, string> => ({});

/** A stored JSON load result (one with `metadata`, `metadata-location` and `config`), parsed; else undefined. */
function loadResultOf(response: StoredResponse): Record<string, unknown> | undefined {
  if (response.body === null || !String(response.headers['content-type']).startsWith('application/json'))
    return undefined;
  const result = JSON.parse(Buffer.from(response.body).toString()) as unknown;
  if (typeof result !== 'object' || result === null || !('metadata' in result) || !('config' in result))
    return undefined;
  return result as Record<string, unknown>;
}

/** Rewrite a load result; other answers stay as they are. */
function withBody(
  response: StoredResponse,
  rewrite: (result: Record<string, unknown>) => object,
): StoredResponse {
  const result = loadResultOf(response);
  return result === undefined
    ? response
    : { ...response, body: Buffer.from(JSON.stringify(rewrite(result))) };
}

/** The table-uuid or view-uuid of a stored load result, if it is one. */
function loadResultUuid(response: StoredResponse): string | undefined {
  const metadata = loadResultOf(response)?.metadata as Record<string, unknown> | undefined;
  const value = metadata?.['table-uuid'] ?? metadata?.['view-uuid'];
  return typeof value === 'string' ? value : undefined;
}

/** The catalog prefix of a request ('' without one): keys are scoped to prefix + principal. */
const prefixOf = (request: FastifyRequest): string => (request.params as { prefix?: string }).prefix ?? '';

export async function buildApp(config: ServerConfig, db: CatalogDatabase): Promise<FastifyInstance> {
  const app = Fastify({
    logger: { level: config.logLevel },
    // Iceberg namespaces may be long and multipart; paths carry them percent-encoded.
    routerOptions: { maxParamLength: 2048 },
    // HEAD routes are the spec's own (204 when the entity exists), not GET without a body.
    exposeHeadRoutes: false,
  });
  app.decorateRequest('principal', '');

  app.addHook('onRequest', async (request) => {
    if (config.tokens.size === 0) {
      request.principal = 'anonymous';
      return;
    }
    if (request.url === '/healthz' || request.url === '/readyz') return;
    const match = /^Bearer (.+)$/.exec(request.headers.authorization ?? '');
    const principal = match ? config.tokens.get(match[1] as string) : undefined;
    if (principal === undefined) throw notAuthorized();
    request.principal = principal;
  });

  if (config.idempotency.enabled) {
    await app.register(idempotency, {
      store: db.store,
      keyFormat: 'uuidv7',
      lifetimeMs: config.idempotency.lifetimeMs,
      leaseMs: config.idempotency.leaseMs,
      methods: ['POST', 'DELETE'],
      // The spec declares 400, not 422, for every operation; Iceberg's Java client retries 503 with the same
      // key, and reads 409 as AlreadyExists / CommitFailed.
      statuses: { keyReused: 400, inProgress: 503 },
      inFlight: { strategy: 'wait', maxWaitMs: config.idempotency.maxWaitMs, timeoutStatus: 503 },
      scope: (request) => `${prefixOf(request)}\u001f${request.principal}`,
      // A load result's `config` is where a catalog vends storage credentials: it is stored empty, and a
      // replay gets the config that holds now.
      redact: (response) => withBody(response, (result) => ({ ...result, config: {} })),
      // A replayed load result (create, register, replace) shows the table or view as it is now, as the spec
      // allows ("an equivalent final response ... may reflect a newer state"), found by its UUID.
      rebuildReplay: async (stored, { scope }) => {
        const uuid = loadResultUuid(stored);
        const current =
          uuid === undefined ? undefined : await getEntityByUuid(db, scope.split('\u001f')[0] ?? '', uuid);
        return withBody(stored, (result) => ({
          ...result,
          ...(current === undefined
            ? {}
            : { 'metadata-location': current.metadataLocation, metadata: current.metadata }),
          config: tableConfig(),
        }));
      },
      formatError: (error: IdemError) => ({
        error: {
          message: error.message,
          type: ERROR_TYPES[error.status] ?? 'BadRequestException',
          code: error.status,
        },
      }),
    });
  }

  app.setErrorHandler((error, request, reply) => {
    if (error instanceof IcebergError) {
      if (error.code === 503) reply.header('retry-after', '1');
      return reply.code(error.code).type('application/json').send(error.toJSON());
    }
    const fastifyError = error as { statusCode?: number; validation?: unknown; message: string };
    if (
      fastifyError.statusCode !== undefined &&
      fastifyError.statusCode >= 400 &&
      fastifyError.statusCode < 500
    ) {
      // Malformed JSON, a body of the wrong type, a missing field: a 400 that names the problem.
      return reply
        .code(400)
        .type('application/json')
        .send(new IcebergError(400, 'BadRequestException', fastifyError.message).toJSON());
    }
    request.log.error(error);
    reply.header('retry-after', '1');
    return reply
      .code(503)
      .type('application/json')
      .send(
        new IcebergError(
          503,
          'ServiceUnavailableException',
          'the catalog is unavailable; retry later',
        ).toJSON(),
      );
  });

  app.setNotFoundHandler((request, reply) =>
    reply
      .code(404)
      .type('application/json')
      .send(
        new IcebergError(404, 'NotFoundException', `no route for ${request.method} ${request.url}`).toJSON(),
      ),
  );

  app.get('/v1/config', async () => ({
    defaults: {},
    overrides: {},
    endpoints: ENDPOINTS,
    ...(config.idempotency.enabled ? { 'idempotency-key-lifetime': config.idempotency.lifetime } : {}),
  }));

  app.get('/healthz', async () => ({ status: 'ok' }));
  app.get('/readyz', async (_request, reply) => {
    try {
      await db.ping();
      return { status: 'ready' };
    } catch {
      return reply.code(503).send({ status: 'database unreachable' });
    }
  });

  for (const prefix of ['/v1', '/v1/:prefix']) {
    await app.register(catalogRoutes, { prefix, config, db });
    await app.register(viewRoutes, { prefix, config, db });
  }
  return app;
}
