import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import {
  alreadyExists,
  badRequest,
  IcebergError,
  noSuchNamespace,
  noSuchTable,
} from '../catalog/iceberg-error.js';
import { ancestorsOf } from '../catalog/paths.js';
import * as repo from '../catalog/repository.js';
import { SEPARATOR } from '../catalog/repository.js';
import { unwrittenOnFailure } from '../catalog/table-commit.js';
import { newTableMetadata } from '../catalog/table-metadata.js';
import type { Executor } from '../database/executor.js';
import { metadataAnswer, send } from '../http/answer.js';
import { mutate } from '../idempotency/mutate.js';
import { registration, renameHandler } from './entity-ops.js';
import {
  body,
  loadAnswer,
  namespaceOf,
  namespaceParts,
  type Params,
  requireNamespace,
  sendLoadResult,
  stringMap,
} from './parse.js';
import { type CatalogRouteOptions, routePlugin } from './route-plugin.js';
import { commitTableHandler, commitTransactionHandler } from './table-commits.js';

const routes: FastifyPluginAsync<CatalogRouteOptions> = async (app, { db, warehouse }) => {
  // ---- namespaces
  app.get('/namespaces', async (request) => {
    const { prefix = '' } = request.params as Params;
    // Validated and coerced by the spec's schema: pageSize is an integer of at least 1.
    const query = request.query as { parent?: string; pageToken?: string | null; pageSize?: number };
    const parent = query.parent === undefined ? undefined : namespaceParts(query.parent).join(SEPARATOR);
    if (parent !== undefined) await requireNamespace(db.until(request.deadline), prefix, parent);
    const depth = parent === undefined ? 1 : parent.split(SEPARATOR).length + 1;
    const all = (await repo.listNamespaces(db.until(request.deadline), prefix)).filter(
      (ns) =>
        ns.split(SEPARATOR).length === depth && (parent === undefined || ns.startsWith(parent + SEPARATOR)),
    );
    const start = query.pageToken === undefined || query.pageToken === null ? 0 : Number(query.pageToken);
    const size = query.pageSize ?? Math.max(all.length, 1);
    if (!Number.isSafeInteger(start) || start < 0) throw badRequest('invalid pageToken');
    if (!Number.isSafeInteger(size) || size < 1) throw badRequest('pageSize must be a positive integer');
    const page = all.slice(start, start + size);
    const next = start + size < all.length ? String(start + size) : null;
    return {
      namespaces: page.map((ns) => ns.split(SEPARATOR)),
      ...(next === null ? {} : { 'next-page-token': next }),
    };
  });

  app.post('/namespaces', async (request, reply) => {
    const { prefix = '' } = request.params as Params;
    const input = body(request);
    if (!Array.isArray(input.namespace) || input.namespace.length === 0) {
      throw badRequest('namespace must be a non-empty array of names');
    }
    const parts = namespaceParts((input.namespace as unknown[]).map(String).join(SEPARATOR));
    const properties = stringMap(input.properties, 'properties');
    return mutate(reply, db, async (tx) => {
      const key = parts.join(SEPARATOR);
      if ((await repo.getNamespace(tx, prefix, key)) !== undefined)
        throw alreadyExists(`Namespace ${parts.join('.')}`);
      // The spec declares no 404 for createNamespace: a missing parent is a bad request.
      // The parent is share-locked until this commits: a concurrent drop of it waits, then finds it not empty.
      if (
        parts.length > 1 &&
        (await repo.getNamespace(tx, prefix, parts.slice(0, -1).join(SEPARATOR), { lock: 'share' })) ===
          undefined
      )
        throw badRequest(`the parent namespace ${parts.slice(0, -1).join('.')} does not exist`);
      await repo.insertNamespace(tx, prefix, key, properties);
      return { status: 200, body: { namespace: parts, properties } };
    });
  });

  app.get('/namespaces/:namespace', async (request) => {
    const { prefix, parts, key } = namespaceOf(request);
    return { namespace: parts, properties: await requireNamespace(db.until(request.deadline), prefix, key) };
  });

  app.head('/namespaces/:namespace', async (request, reply) => {
    const { prefix, key } = namespaceOf(request);
    await requireNamespace(db.until(request.deadline), prefix, key);
    return reply.code(204).send();
  });

  app.delete('/namespaces/:namespace', async (request, reply) => {
    const { prefix, parts, key } = namespaceOf(request);
    return mutate(reply, db, async (tx) => {
      // Locked until the drop commits: nothing can be created in it meanwhile (creates share-lock it).
      await requireNamespace(tx, prefix, key, 'update');
      if (!(await repo.namespaceIsEmpty(tx, prefix, key))) {
        throw new IcebergError(
          409,
          'NamespaceNotEmptyException',
          `Namespace ${parts.join('.')} is not empty`,
        );
      }
      await repo.deleteNamespace(tx, prefix, key);
      return { status: 204 };
    });
  });

  app.post('/namespaces/:namespace/properties', async (request, reply) => {
    const { prefix, key } = namespaceOf(request);
    const input = body(request);
    const updates = stringMap(input.updates, 'updates');
    const removals = input.removals === undefined ? [] : input.removals;
    if (!Array.isArray(removals) || !removals.every((r) => typeof r === 'string')) {
      throw badRequest('removals must be an array of strings');
    }
    // Own keys only: `constructor` or `toString` are property names like any other.
    const both = removals.filter((r) => Object.hasOwn(updates, r));
    if (both.length > 0) {
      throw new IcebergError(
        422,
        'UnprocessableEntityException',
        `properties both updated and removed: ${both.join(', ')}`,
      );
    }
    return mutate(reply, db, async (tx) => {
      const properties = { ...(await requireNamespace(tx, prefix, key, 'update')) };
      const removed = removals.filter((r) => Object.hasOwn(properties, r));
      const missing = removals.filter((r) => !Object.hasOwn(properties, r));
      for (const r of removed) delete properties[r];
      Object.assign(properties, updates);
      await repo.setNamespaceProperties(tx, prefix, key, properties);
      return { status: 200, body: { updated: Object.keys(updates), removed, missing } };
    });
  });

  // ---- tables
  app.get('/namespaces/:namespace/tables', async (request) => {
    const { prefix, parts, key } = namespaceOf(request);
    await requireNamespace(db.until(request.deadline), prefix, key);
    const names = await repo.listEntities(db.until(request.deadline), prefix, key, 'table');
    return { identifiers: names.map((name) => ({ namespace: parts, name })) };
  });

  app.post('/namespaces/:namespace/tables', async (request, reply) => {
    const { prefix, parts, key } = namespaceOf(request);
    const input = body(request);
    if (typeof input.name !== 'string' || input.name === '')
      throw badRequest('name must be a non-empty string');
    const name = input.name;
    const nowMs = Date.now();
    const location =
      typeof input.location === 'string' ? input.location : warehouse.defaultLocation(prefix, parts, name);
    const metadata = newTableMetadata(input, location, nowMs);
    if (input['stage-create'] === true) {
      // Staged: nothing is committed; the client commits later with assert-create. With a key its answer is the
      // key's as any mutation's is, so that a retry gets the same staged table (its UUID, its location); without
      // one it is a read, in no transaction.
      const staged = { status: 200, body: { metadata, config: {} } };
      if (request.idempotency === undefined) {
        await requireNamespace(db.until(request.deadline), prefix, key);
        return send(reply, staged);
      }
      return mutate(reply, db, async (tx) => {
        await requireNamespace(tx, prefix, key);
        return staged;
      });
    }
    return mutate(reply, db, async (tx) => {
      // Share-locked until the table is in: a concurrent drop of the namespace waits, then finds it not empty.
      await requireNamespace(tx, prefix, key, 'share');
      if ((await repo.getEntity(tx, { prefix, namespace: key, name })) !== undefined)
        throw alreadyExists(`Table ${[...parts, name].join('.')}`);
      // Written once the key is reserved: a retry that replays writes nothing.
      const text = warehouse.encode(metadata);
      const { metadataLocation, path } = await warehouse.writeMetadata(location, 0, text);
      const entity = { kind: 'table' as const, metadataLocation, metadata, text, path };
      // A concurrent create of the name that committed first: its 409 leaves no file of this one's behind.
      await unwrittenOnFailure(
        warehouse,
        () => [metadataLocation],
        () => repo.insertEntity(tx, { prefix, namespace: key, name }, entity),
      );
      return loadAnswer(entity);
    });
  });

  /** The table a request names, read on `on` (the database, or a mutation's transaction). */
  const loadTable = async (request: FastifyRequest, on: Executor = db.until(request.deadline)) => {
    const { prefix, parts, key } = namespaceOf(request);
    const table = (request.params as Params).table as string;
    const entity = await repo.getEntity(on, { prefix, namespace: key, name: table });
    if (entity === undefined || entity.kind !== 'table') {
      if ((await repo.getNamespace(on, prefix, key)) === undefined) throw noSuchNamespace(parts.join('.'));
      throw noSuchTable([...parts, table].join('.'));
    }
    return entity;
  };

  app.get('/namespaces/:namespace/tables/:table', async (request, reply) => {
    const entity = await loadTable(request);
    const etag = `"${Buffer.from(entity.metadataLocation).toString('base64url')}"`;
    if (request.headers['if-none-match'] === etag) return reply.code(304).header('etag', etag).send();
    return sendLoadResult(reply.header('etag', etag), entity);
  });

  app.head('/namespaces/:namespace/tables/:table', async (request, reply) => {
    await loadTable(request);
    return reply.code(204).send();
  });

  app.post('/namespaces/:namespace/tables/:table', commitTableHandler(db, warehouse));
  app.post('/transactions/commit', commitTransactionHandler(db, warehouse));

  app.post('/namespaces/:namespace/tables/:table/unregister', async (request, reply) => {
    const { prefix, parts, key } = namespaceOf(request);
    const table = (request.params as Params).table as string;
    return mutate(reply, db, async (tx) => {
      const entity = await repo.getEntity(tx, { prefix, namespace: key, name: table });
      if (entity === undefined || entity.kind !== 'table') throw noSuchTable([...parts, table].join('.'));
      await repo.deleteEntity(tx, { prefix, namespace: key, name: table }, 'table');
      return metadataAnswer(entity.metadataLocation, entity.metadata, entity.text);
    });
  });

  app.delete('/namespaces/:namespace/tables/:table', async (request, reply) => {
    const { prefix, parts, key } = namespaceOf(request);
    const table = (request.params as Params).table as string;
    const purge = (request.query as { purgeRequested?: boolean }).purgeRequested === true;
    let location: string | undefined;
    return mutate(
      reply,
      db,
      async (tx) => {
        location = undefined;
        const entity = await repo.getEntity(tx, { prefix, namespace: key, name: table }, { lock: 'update' });
        if (entity === undefined || entity.kind !== 'table') throw noSuchTable([...parts, table].join('.'));
        await repo.deleteEntity(tx, { prefix, namespace: key, name: table }, 'table');
        if (!purge) return { status: 204 };
        // Refused before anything is dropped: a location outside the warehouse, or the warehouse itself.
        const path = await warehouse.pathOf(String(entity.metadata.location), 'the table location');
        // Never a directory that holds, or lies inside, the location of a table or view still in the catalog
        // (in any prefix): placed there by a client, or registered twice. The table is dropped all the same
        // (the spec's answer is 204, and a 409 would tell of another tenant's table); its files stay, logged.
        const others = await repo.entitiesAround(tx, path, ancestorsOf(path));
        if (others.length === 0) location = String(entity.metadata.location);
        else
          request.log.warn(
            { path, others: others.slice(0, 10), count: others.length },
            'purge skipped: the location holds or lies inside the location of a live table or view',
          );
        return { status: 204 };
      },
      // The drop has committed: a purge that fails now is logged, and the answer stays 204. It runs within the
      // request's deadline (less the time to answer); what it has not removed by then stays, logged.
      async () => {
        if (location === undefined) return;
        const done = await warehouse.purge(location, request.deadline - ANSWER_MS).catch((error: unknown) => {
          request.log.warn({ err: error, location }, 'purge failed');
          return true;
        });
        if (!done)
          request.log.warn(
            { location },
            "purge stopped at the request's deadline: the rest of the table's files stay at its location",
          );
      },
    );
  });

  app.post('/namespaces/:namespace/register', async (request, reply) => {
    const { prefix, parts, key } = namespaceOf(request);
    const { name, metadataLocation, overwrite, read } = registration(request, warehouse, 'table');
    return mutate(reply, db, async (tx) => {
      const { metadata, path } = await read();
      await requireNamespace(tx, prefix, key, 'share');
      // Locked: an overwrite replaces exactly the table it found.
      const existing = await repo.getEntity(tx, { prefix, namespace: key, name }, { lock: 'update' });
      const text = warehouse.encode(metadata);
      const entity = { kind: 'table' as const, metadataLocation, metadata, text, path };
      // Tables and views share names; `overwrite` replaces a table, never a view (its row would hold table
      // metadata under kind 'view').
      if (existing?.kind === 'view') throw alreadyExists(`View ${[...parts, name].join('.')}`);
      if (existing !== undefined && !overwrite) throw alreadyExists(`Table ${[...parts, name].join('.')}`);
      if (existing === undefined) await repo.insertEntity(tx, { prefix, namespace: key, name }, entity);
      else await repo.swapEntity(tx, { prefix, namespace: key, name }, existing.metadataLocation, entity);
      return loadAnswer(entity);
    });
  });

  app.post('/tables/rename', renameHandler(db, 'table'));

  // Nothing is kept of a report. With a key its answer is the key's all the same (a key reused for it is
  // refused); without one it is a read, in no transaction (engines send one per scan).
  app.post('/namespaces/:namespace/tables/:table/metrics', async (request, reply) => {
    if (request.idempotency === undefined) {
      await loadTable(request);
      return reply.code(204).send();
    }
    return mutate(reply, db, async (tx) => {
      await loadTable(request, tx);
      return { status: 204 };
    });
  });
};

/** The time a purge leaves before the request's deadline, to answer in. */
const ANSWER_MS = 50;

/** The namespace and table routes, under one path prefix. */
export const catalogRoutes = routePlugin('reference-server/catalog-routes', routes);

/** What this server implements, as `/v1/config` advertises it. */
export const ENDPOINTS = [
  'GET /v1/{prefix}/namespaces',
  'POST /v1/{prefix}/namespaces',
  'GET /v1/{prefix}/namespaces/{namespace}',
  'HEAD /v1/{prefix}/namespaces/{namespace}',
  'DELETE /v1/{prefix}/namespaces/{namespace}',
  'POST /v1/{prefix}/namespaces/{namespace}/properties',
  'GET /v1/{prefix}/namespaces/{namespace}/tables',
  'POST /v1/{prefix}/namespaces/{namespace}/tables',
  'GET /v1/{prefix}/namespaces/{namespace}/tables/{table}',
  'HEAD /v1/{prefix}/namespaces/{namespace}/tables/{table}',
  'POST /v1/{prefix}/namespaces/{namespace}/tables/{table}',
  'DELETE /v1/{prefix}/namespaces/{namespace}/tables/{table}',
  'POST /v1/{prefix}/namespaces/{namespace}/register',
  'POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/metrics',
  'POST /v1/{prefix}/tables/rename',
  'POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/unregister',
  'POST /v1/{prefix}/transactions/commit',
  'GET /v1/{prefix}/namespaces/{namespace}/views',
  'POST /v1/{prefix}/namespaces/{namespace}/views',
  'GET /v1/{prefix}/namespaces/{namespace}/views/{view}',
  'HEAD /v1/{prefix}/namespaces/{namespace}/views/{view}',
  'POST /v1/{prefix}/namespaces/{namespace}/views/{view}',
  'DELETE /v1/{prefix}/namespaces/{namespace}/views/{view}',
  'POST /v1/{prefix}/views/rename',
  'POST /v1/{prefix}/namespaces/{namespace}/register-view',
];
