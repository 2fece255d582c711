import Fastify, { type FastifyInstance } from 'fastify';
import { MAX_BODY_BYTES, MAX_PATH_PARAMETER_CHARS } from './catalog/limits.js';
import { stringifyLosslessJson } from './catalog/lossless-json.js';
import { openWarehouse } from './catalog/warehouse.js';
import type { ServerConfig } from './config.js';
import type { CatalogDatabase } from './database/catalog-database.js';
import { bearerAuth } from './http/bearer-auth.js';
import { drain } from './http/drain.js';
import { clientErrorHandler, errorHandling, frameworkErrors } from './http/errors.js';
import { jsonBody } from './http/json-body.js';
import { locationGuard } from './http/location-guard.js';
import { wellEncodedQuery } from './http/query-string.js';
import { requestDeadline } from './http/request-deadline.js';
import { routeValidation } from './http/route-validation.js';
import { openIdempotencyStore } from './idempotency/open-store.js';
import { catalogIdempotency } from './idempotency/plugin.js';
import { recordPurge } from './idempotency/record-purge.js';
import { OPEN_PATHS, observability } from './observability/install.js';
import { loggerOptions, readableLogs } from './observability/logger.js';
import { OneLineRequests, requestLog } from './observability/request-log.js';
import { catalogRoutes, ENDPOINTS } from './routes/catalog-routes.js';
import { viewRoutes } from './routes/view-routes.js';

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
  // The store IDEMPOTENCY_STORE names (the catalog's own database unless told otherwise). What it opened (a
  // pool, a Redis client) is closed with the server, after the requests in flight have finished: a key they
  // hold is finalized or released first.
  const backend = openIdempotencyStore(config, db, app.log);
  app.addHook('onClose', () => backend.close());
  // Every object a route returns may hold longs past 2^53 as bigints, which JSON.stringify refuses. Set
  // before any route is made: a route keeps the serializer there was when it was made.
  app.setReplySerializer((payload) => stringifyLosslessJson(payload));
  // In the order their hooks run. Each plugin names the ones it must come after (its `dependencies`):
  // registered out of order, the server does not start.
  await app.register(errorHandling);
  await app.register(requestDeadline, { requestTimeoutMs: config.requestTimeoutMs });
  await app.register(observability, { config, db, backend, readable: readableLogs(config, logTo) });
  await app.register(drain);
  await app.register(requestLog);
  await app.register(jsonBody);
  await app.register(wellEncodedQuery);
  await app.register(routeValidation);
  await app.register(bearerAuth, { tokens: config.tokens, openPaths: OPEN_PATHS });
  await app.register(locationGuard, { warehouse });
  await app.register(catalogIdempotency, { config, db, warehouse, backend });
  await app.register(recordPurge, { config, store: backend.store });

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
