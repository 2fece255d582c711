import type { FastifyPluginAsync } from 'fastify';
import fp from 'fastify-plugin';
import type { Warehouse } from '../catalog/warehouse.js';
import type { CatalogDatabase } from '../database/catalog-database.js';

/** What the catalog's route plugins are registered with (and a `prefix`). */
export interface CatalogRouteOptions {
  readonly db: CatalogDatabase;
  readonly warehouse: Warehouse;
}

/**
 * Catalog routes as a plugin named `name`, encapsulated: it is registered once per path prefix. It comes
 * after every plugin that acts on requests, since a route is given its schema and its idempotency handling as
 * it is made (their onRoute hooks), and an encapsulated plugin copies the hooks and body parsers there are
 * when it is created.
 */
export const routePlugin = (name: string, routes: FastifyPluginAsync<CatalogRouteOptions>) =>
  fp(routes, {
    fastify: '5.x',
    name,
    encapsulate: true,
    dependencies: [
      'reference-server/errors',
      'reference-server/deadline',
      'reference-server/observability',
      'reference-server/drain',
      'reference-server/request-log',
      'reference-server/json-body',
      'reference-server/query-string',
      'reference-server/route-validation',
      'reference-server/bearer-auth',
      'reference-server/location-guard',
      'reference-server/idempotency',
    ],
  });
