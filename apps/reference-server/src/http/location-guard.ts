import type { FastifyInstance } from 'fastify';
import type { Warehouse } from '../catalog/warehouse.js';

type Node = Record<string, unknown>;
const isNode = (value: unknown): value is Node =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** `set-location` updates of a commit, with where each sits in the body. */
function setLocations(updates: unknown, at: string): { location: unknown; field: string }[] {
  if (!Array.isArray(updates)) return [];
  return updates.flatMap((update, i) =>
    isNode(update) && update.action === 'set-location'
      ? [{ location: update.location, field: `${at}updates/${i}/location` }]
      : [],
  );
}

/**
 * Every location a (schema-valid) request body names, by the spec's request schemas: CreateTableRequest and
 * CreateViewRequest `location`, RegisterTableRequest and RegisterViewRequest `metadata-location`, and the
 * `set-location` updates of CommitTableRequest, CommitViewRequest and CommitTransactionRequest.
 */
export function locationsOf(body: unknown): { location: string; field: string }[] {
  if (!isNode(body)) return [];
  const found = [
    { location: body.location, field: 'location' },
    { location: body['metadata-location'], field: 'metadata-location' },
    ...setLocations(body.updates, ''),
    ...(Array.isArray(body['table-changes'])
      ? body['table-changes'].flatMap((change, i) =>
          setLocations(isNode(change) ? change.updates : undefined, `table-changes/${i}/`),
        )
      : []),
  ];
  return found.filter(
    (entry): entry is { location: string; field: string } => typeof entry.location === 'string',
  );
}

/**
 * Confine every location a request names to the warehouse before the request goes any further: added ahead of
 * the idempotency plugin, so a location outside the warehouse is refused (400/403) without taking a key.
 */
export function guardLocations(app: FastifyInstance, warehouse: Warehouse) {
  app.addHook('preHandler', async (request) => {
    for (const { location, field } of locationsOf(request.body)) await warehouse.check(location, field);
  });
}
