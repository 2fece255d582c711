import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import {
  alreadyExists,
  badRequest,
  commitFailed,
  noSuchNamespace,
  noSuchView,
} from '../catalog/iceberg-error.js';
import * as repo from '../catalog/repository.js';
import { unwrittenOnFailure } from '../catalog/table-commit.js';
import {
  applyViewUpdates,
  checkViewRequirements,
  newViewMetadata,
  type ViewMetadata,
} from '../catalog/view-metadata.js';
import { mutate } from '../idempotency/mutate.js';
import { registration, renameHandler } from './entity-ops.js';
import {
  body,
  checkUpdateCount,
  loadAnswer,
  namespaceOf,
  requireNamespace,
  sendLoadResult,
} from './parse.js';
import { type CatalogRouteOptions, routePlugin } from './route-plugin.js';

const viewName = (request: FastifyRequest) => (request.params as { view: string }).view;

const routes: FastifyPluginAsync<CatalogRouteOptions> = async (app, { db, warehouse }) => {
  /**
   * Create a view where nothing of that name exists yet (create and register-view); `entity` is made once the
   * key is reserved and the name found free, so that a retry that replays writes nothing. `written`: its
   * metadata file is the catalog's own, written by `entity` (a create, not a registration), and removed again
   * when the insert fails.
   */
  const insertView = (
    reply: FastifyReply,
    at: { prefix: string; parts: string[]; key: string; name: string },
    entity: () => Promise<repo.NewEntity>,
    written: boolean,
  ) =>
    mutate(reply, db, async (tx) => {
      // Share-locked until the view is in: a concurrent drop of the namespace waits, then finds it not empty.
      await requireNamespace(tx, at.prefix, at.key, 'share');
      if ((await repo.getEntity(tx, { prefix: at.prefix, namespace: at.key, name: at.name })) !== undefined) {
        throw alreadyExists(`View ${[...at.parts, at.name].join('.')}`);
      }
      const made = await entity();
      const insert = () =>
        repo.insertEntity(tx, { prefix: at.prefix, namespace: at.key, name: at.name }, made);
      // A concurrent create of the name that committed first: its 409 leaves no file of this one's behind.
      await (written ? unwrittenOnFailure(warehouse, () => [made.metadataLocation], insert) : insert());
      return loadAnswer(made);
    });

  app.get('/namespaces/:namespace/views', async (request) => {
    const { prefix, parts, key } = namespaceOf(request);
    await requireNamespace(db.until(request.deadline), prefix, key);
    const names = await repo.listEntities(db.until(request.deadline), prefix, key, 'view');
    return { identifiers: names.map((name) => ({ namespace: parts, name })) };
  });

  app.post('/namespaces/:namespace/views', async (request, reply) => {
    const { prefix, parts, key } = namespaceOf(request);
    const input = body(request);
    if (typeof input.name !== 'string' || input.name === '')
      throw badRequest('name must be a non-empty string');
    const name = input.name;
    const location =
      typeof input.location === 'string' ? input.location : warehouse.defaultLocation(prefix, parts, name);
    const metadata = newViewMetadata(input, location, Date.now());
    return insertView(
      reply,
      { prefix, parts, key, name },
      async () => {
        const text = warehouse.encode(metadata);
        const { metadataLocation, path } = await warehouse.writeMetadata(location, 0, text);
        return { kind: 'view', metadataLocation, metadata, text, path };
      },
      true,
    );
  });

  const loadView = async (request: FastifyRequest) => {
    const { prefix, parts, key } = namespaceOf(request);
    const name = viewName(request);
    const entity = await repo.getEntity(db.until(request.deadline), { prefix, namespace: key, name });
    if (entity === undefined || entity.kind !== 'view') {
      if ((await repo.getNamespace(db.until(request.deadline), prefix, key)) === undefined)
        throw noSuchNamespace(parts.join('.'));
      throw noSuchView([...parts, name].join('.'));
    }
    return entity;
  };

  app.get('/namespaces/:namespace/views/:view', async (request, reply) =>
    sendLoadResult(reply, await loadView(request)),
  );

  app.head('/namespaces/:namespace/views/:view', async (request, reply) => {
    await loadView(request);
    return reply.code(204).send();
  });

  app.post('/namespaces/:namespace/views/:view', async (request, reply) => {
    const { prefix, parts, key } = namespaceOf(request);
    const name = viewName(request);
    const input = body(request);
    checkUpdateCount(input, 'the commit');
    // Read, checked and replaced in the transaction, the view's row locked: concurrent replacements that do
    // not conflict all land, and a retry of one that went through replays it.
    return mutate(reply, db, async (tx) => {
      const current = await repo.getEntity(tx, { prefix, namespace: key, name }, { lock: 'update' });
      if (current === undefined || current.kind !== 'view') {
        if ((await repo.getNamespace(tx, prefix, key)) === undefined) throw noSuchNamespace(parts.join('.'));
        throw noSuchView([...parts, name].join('.'));
      }
      const metadata = current.metadata as ViewMetadata;
      checkViewRequirements(metadata, input.requirements);
      const next = applyViewUpdates(metadata, input.updates, Date.now());
      const text = warehouse.encode(next);
      const { metadataLocation, path } = await warehouse.writeMetadata(
        next.location,
        metadata['version-log'].length,
        text,
      );
      const entity = { kind: 'view' as const, metadataLocation, metadata: next, text, path };
      await unwrittenOnFailure(
        warehouse,
        () => [metadataLocation],
        async () => {
          if (
            !(await repo.swapEntity(tx, { prefix, namespace: key, name }, current.metadataLocation, entity))
          )
            throw commitFailed('the view changed concurrently; refresh and retry');
        },
      );
      return loadAnswer(entity);
    });
  });

  app.delete('/namespaces/:namespace/views/:view', async (request, reply) => {
    const { prefix, parts, key } = namespaceOf(request);
    const name = viewName(request);
    return mutate(reply, db, async (tx) => {
      if ((await repo.deleteEntity(tx, { prefix, namespace: key, name }, 'view')) !== 1)
        throw noSuchView([...parts, name].join('.'));
      return { status: 204 };
    });
  });

  app.post('/views/rename', renameHandler(db, 'view'));

  app.post('/namespaces/:namespace/register-view', async (request, reply) => {
    const { prefix, parts, key } = namespaceOf(request);
    const { name, metadataLocation, read } = registration(request, warehouse, 'view');
    return insertView(
      reply,
      { prefix, parts, key, name },
      async () => {
        const { metadata, path } = await read();
        return { kind: 'view', metadataLocation, metadata, text: warehouse.encode(metadata), path };
      },
      false,
    );
  });
};

/**
 * The view routes, under one path prefix. Views share the namespace's names with tables: a view and a table
 * cannot have the same name.
 */
export const viewRoutes = routePlugin('reference-server/view-routes', routes);
