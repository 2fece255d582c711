import type { FastifyReply, FastifyRequest } from 'fastify';
import { alreadyExists, badRequest, noSuchTable, noSuchView } from '../catalog/iceberg-error.js';
import * as repo from '../catalog/repository.js';
import { type EntityKind, SEPARATOR } from '../catalog/repository.js';
import { registeredTableMetadata } from '../catalog/table-metadata.js';
import { registeredViewMetadata } from '../catalog/view-metadata.js';
import type { Warehouse } from '../catalog/warehouse.js';
import type { CatalogDatabase } from '../database/catalog-database.js';
import { documentProblem } from '../http/validator.js';
import { mutate } from '../idempotency/mutate.js';
import { body, identifier, type Params, requireNamespace } from './parse.js';

const LABEL: Record<EntityKind, string> = { table: 'Table', view: 'View' };
const MISSING: Record<EntityKind, (name: string) => Error> = { table: noSuchTable, view: noSuchView };

/** POST /tables/rename and /views/rename: move an entity, to an existing namespace and a free name. */
export function renameHandler(db: CatalogDatabase, kind: EntityKind) {
  return async (request: FastifyRequest, reply: FastifyReply) => {
    const { prefix = '' } = request.params as Params;
    const input = body(request);
    const source = identifier(input.source, 'source');
    const destination = identifier(input.destination, 'destination');
    return mutate(reply, db, async (tx) => {
      const from = { prefix, namespace: source.namespace.join(SEPARATOR), name: source.name };
      const to = { prefix, namespace: destination.namespace.join(SEPARATOR), name: destination.name };
      const entity = await repo.getEntity(tx, from, { lock: 'update' });
      if (entity === undefined || entity.kind !== kind)
        throw MISSING[kind]([...source.namespace, source.name].join('.'));
      // Share-locked: the destination cannot be dropped while the entity moves in.
      await requireNamespace(tx, prefix, to.namespace, 'share');
      if ((await repo.getEntity(tx, to)) !== undefined) {
        throw alreadyExists(`${LABEL[kind]} ${[...destination.namespace, destination.name].join('.')}`);
      }
      await repo.renameEntity(tx, from, to, kind);
      return { status: 204 };
    });
  };
}

const COMPONENT: Record<EntityKind, string> = { table: 'TableMetadata', view: 'ViewMetadata' };

/**
 * The body of a register / register-view request, and how to read the metadata file it points at (inside the
 * warehouse, bounded) and check it: it must be the spec's TableMetadata / ViewMetadata with what commits need,
 * and its own `location` must be inside the warehouse too, since later commits write there. The file is read
 * by the mutation, once its key is reserved: a retry of a registration that went through replays it, whatever
 * became of the file since.
 */
export function registration(request: FastifyRequest, warehouse: Warehouse, kind: EntityKind) {
  const input = body(request);
  if (typeof input.name !== 'string' || input.name === '')
    throw badRequest('name must be a non-empty string');
  if (typeof input['metadata-location'] !== 'string') throw badRequest('metadata-location must be a string');
  const metadataLocation = input['metadata-location'];
  return {
    name: input.name,
    metadataLocation,
    overwrite: input.overwrite === true,
    async read() {
      const document = await warehouse.readMetadata(metadataLocation, 'metadata-location', request.deadline);
      const problem = documentProblem(COMPONENT[kind], document);
      if (problem !== undefined)
        throw badRequest(`metadata-location does not hold Iceberg ${kind} metadata: ${problem}`);
      const metadata =
        kind === 'table' ? registeredTableMetadata(document) : registeredViewMetadata(document);
      const path = await warehouse.pathOf(
        String(metadata.location),
        'the location of the registered metadata',
      );
      return { metadata, path };
    },
  };
}
