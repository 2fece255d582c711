import type { FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import type { Warehouse } from '../catalog/warehouse.js';

type Node = Record<string, unknown>;
type Found = { location: unknown; field: string }[];

const isNode = (value: unknown): value is Node =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** `set-location` updates of a commit, with where each sits in the body. */
function setLocations(updates: unknown, at: string): Found {
  if (!Array.isArray(updates)) return [];
  return updates.flatMap((update, i) =>
    isNode(update) && update.action === 'set-location'
      ? [{ location: update.location, field: `${at}updates/${i}/location` }]
      : [],
  );
}

/** Where each of the spec's request schemas carries a location. */
const LOCATIONS: Readonly<Record<string, (body: Node) => Found>> = {
  CreateTableRequest: (body) => [{ location: body.location, field: 'location' }],
  CreateViewRequest: (body) => [{ location: body.location, field: 'location' }],
  RegisterTableRequest: (body) => [{ location: body['metadata-location'], field: 'metadata-location' }],
  RegisterViewRequest: (body) => [{ location: body['metadata-location'], field: 'metadata-location' }],
  CommitTableRequest: (body) => setLocations(body.updates, ''),
  CommitViewRequest: (body) => setLocations(body.updates, ''),
  CommitTransactionRequest: (body) =>
    Array.isArray(body['table-changes'])
      ? body['table-changes'].flatMap((change, i) =>
          setLocations(isNode(change) ? change.updates : undefined, `table-changes/${i}/`),
        )
      : [],
};

/** The request schema of a route's body, by name (`CreateTableRequest`), from its `$ref`. */
function bodyComponent(request: FastifyRequest): string | undefined {
  const ref = (request.routeOptions.schema?.body as { $ref?: unknown } | undefined)?.$ref;
  return typeof ref === 'string' ? decodeURIComponent(ref.slice(ref.lastIndexOf('/') + 1)) : undefined;
}

/** Every location a (schema-valid) request body names, with the field that names it. */
export function locationsOf(
  component: string | undefined,
  body: unknown,
): { location: string; field: string }[] {
  const find = component === undefined ? undefined : LOCATIONS[component];
  if (find === undefined || !isNode(body)) return [];
  return find(body).filter(
    (entry): entry is { location: string; field: string } => typeof entry.location === 'string',
  );
}

/**
 * Confine every location a request names to the warehouse before the request goes any further: added ahead of
 * the idempotency plugin, so a location outside the warehouse is refused (400/403) without taking a key. It
 * finds them by the route's body schema, which route validation gives it.
 */
export const locationGuard = fp<{ readonly warehouse: Warehouse }>(
  async (app, { warehouse }) => {
    app.addHook('preHandler', async (request) => {
      for (const { location, field } of locationsOf(bodyComponent(request), request.body))
        await warehouse.check(location, field);
    });
  },
  {
    fastify: '5.x',
    name: 'reference-server/location-guard',
    dependencies: ['reference-server/route-validation'],
  },
);
