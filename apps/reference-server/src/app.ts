import Fastify, { type FastifyInstance } from 'fastify';
import { notAuthorized } from './catalog/iceberg-error.js';
import { MAX_BODY_BYTES, MAX_PATH_PARAMETER_CHARS } from './catalog/limits.js';
import { stringifyLosslessJson } from './catalog/lossless-json.js';
import { openWarehouse } from './catalog/warehouse.js';
import type { ServerConfig } from './config.js';
import type { CatalogDatabase } from './database/catalog-database.js';
import { installDrain } from './http/drain.js';
import { clientErrorHandler, frameworkErrors, installErrorHandling } from './http/errors.js';
import { installJsonBodyParser } from './http/json-body.js';
import { guardLocations } from './http/location-guard.js';
import { requireWellEncodedQuery } from './http/query-string.js';
import { routeSchema } from './http/route-schemas.js';
import { validatorCompiler } from './http/validator.js';
import { registerIdempotency } from './idempotency/plugin.js';
import { startRecordPurge } from './idempotency/record-purge.js';
import { installObservability, isOpenPath } from './observability/install.js';
import { loggerOptions, readableLogs } from './observability/logger.js';
import { keepReasons, OneLineRequests } from './observability/request-log.js';
import { catalogRoutes, ENDPOINTS } from './routes/catalog-routes.js';
import { viewRoutes } from './routes/view-routes.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** Who sent the request: the principal of its bearer token, or `anonymous`. */
    principal: string;
    /**
     * When the request must be answered by (`performance.now()` ms): its arrival plus REQUEST_TIMEOUT_MS. Every
     * database wait it makes is bounded by the time left (src/database/deadline.ts).
     */
    deadline: number;
  }
}

/**
 * The catalog server. A request goes through, in order: the body parser (UTF-8, JSON, depth), authentication,
 * the route's schemas from the OpenAPI document, the warehouse check of any location it names, and only then
 * the idempotency plugin, which reserves its key: malformed input never takes a key or reaches the database.
 */
export async function buildApp(
  config: ServerConfig,
  db: CatalogDatabase,
  /** Where the log goes: the process's stdout unless a test says otherwise. */
  logTo: NodeJS.WritableStream & { isTTY?: boolean } = process.stdout,
): Promise<FastifyInstance> {
  const warehouse = await openWarehouse({
    directory: config.warehouse,
    maxBytes: config.metadataFiles.maxBytes,
    timeoutMs: config.metadataFiles.readTimeoutMs,
    column: db.valueLimit,
  });
  const app = Fastify({
    logger: loggerOptions(config, logTo),
    // One line per request (observability/request-log.ts), not Fastify's two with their objects.
    logController: new OneLineRequests(),
    // Iceberg namespaces may be long and multipart; paths carry them percent-encoded.
    routerOptions: { maxParamLength: MAX_PATH_PARAMETER_CHARS },
    bodyLimit: MAX_BODY_BYTES,
    requestTimeout: config.requestTimeoutMs,
    // Node reads its request timeout when the server is made (setting it afterwards, as Fastify does, arms no
    // check), and checks only every 30 s by default: a slow client would hold its socket that long.
    http: {
      requestTimeout: config.requestTimeoutMs,
      connectionsCheckingInterval: Math.min(config.requestTimeoutMs, 1_000),
    },
    // HEAD routes are the spec's own (204 when the entity exists), not GET without a body.
    exposeHeadRoutes: false,
    // A stop answers requests on open connections itself (http/drain.ts: 503 with Retry-After, Iceberg's
    // error body) and closes idle keep-alive connections at once, instead of waiting out their timeout.
    return503OnClosing: false,
    forceCloseConnections: 'idle',
    frameworkErrors,
    clientErrorHandler,
  });
  app.decorateRequest('principal', '');
  app.decorateRequest('deadline', 0);
  app.decorateRequest('transaction', undefined);
  // Before anything else: one deadline for the whole request, from its arrival.
  app.addHook('onRequest', async (request) => {
    request.deadline = performance.now() + config.requestTimeoutMs;
  });
  // Then the request's server span opens, before any other hook runs.
  const observability = installObservability(app, config, db, readableLogs(config, logTo));
  installDrain(app);
  // Every object a route returns may hold longs past 2^53 as bigints, which JSON.stringify refuses.
  app.setReplySerializer((payload) => stringifyLosslessJson(payload));
  installErrorHandling(app);
  keepReasons(app);
  installJsonBodyParser(app);
  requireWellEncodedQuery(app);
  app.setValidatorCompiler(validatorCompiler);
  // Every route the spec describes validates its path, query and body against the spec's schemas.
  app.addHook('onRoute', (route) => {
    if (route.schema !== undefined || typeof route.method !== 'string') return;
    const schema = routeSchema(route.method, route.url);
    if (schema !== undefined) route.schema = schema;
  });

  app.addHook('onRequest', async (request) => {
    if (config.tokens.size === 0) {
      request.principal = 'anonymous';
      return;
    }
    if (isOpenPath(request.url)) return;
    const match = /^Bearer (.+)$/.exec(request.headers.authorization ?? '');
    const principal = match ? config.tokens.get(match[1] as string) : undefined;
    if (principal === undefined) throw notAuthorized();
    request.principal = principal;
  });

  // Before the idempotency plugin: its preHandler runs after this one.
  guardLocations(app, warehouse);
  if (config.idempotency.enabled)
    await registerIdempotency(app, config, db, warehouse, observability.onEvent);
  startRecordPurge(app, config, db, observability.onEvent);

  app.get('/v1/config', async () => ({
    defaults: {},
    overrides: {},
    endpoints: ENDPOINTS,
    ...(config.idempotency.enabled ? { 'idempotency-key-lifetime': config.idempotency.lifetime } : {}),
  }));

  for (const prefix of ['/v1', '/v1/:prefix']) {
    await app.register(catalogRoutes, { prefix, db, warehouse });
    await app.register(viewRoutes, { prefix, db, warehouse });
  }
  return app;
}
