import type { FastifyReply, FastifyRequest } from 'fastify';
import * as repo from '../catalog/repository.js';
import { SEPARATOR } from '../catalog/repository.js';
import { applyUpdates, checkRequirements, type TableMetadata } from '../catalog/table-metadata.js';
import type { Warehouse } from '../catalog/warehouse.js';
import type { CatalogDatabase, Executor } from '../db.js';
import { badRequest, ConcurrentChange, noSuchTable } from '../errors.js';
import { body, checkUpdateCount, identifier, namespaceOf, type Params } from './parse.js';
import { type Answer, mutate } from './respond.js';

/** Table properties that shape the metadata log, with Iceberg's defaults. */
const PREVIOUS_VERSIONS_MAX = 'write.metadata.previous-versions-max';
const DEFAULT_PREVIOUS_VERSIONS = 100;
const DELETE_AFTER_COMMIT = 'write.metadata.delete-after-commit.enabled';

/** One table's part of a commit, as the client sent it. */
interface TableCommit {
  readonly id: { readonly namespace: string[]; readonly name: string };
  readonly input: Record<string, unknown>;
}

/** A commit ready to swap in: the new metadata is written; only the pointer moves in the transaction. */
interface PreparedCommit {
  readonly key: string;
  readonly name: string;
  readonly label: string;
  readonly expectedLocation: string;
  readonly metadataLocation: string;
  readonly next: TableMetadata;
  /** Metadata files that fell out of the log and are deleted once the commit is in. */
  readonly expired: readonly string[];
}

/** The version of a metadata file, from its name (`00042-<uuid>.metadata.json` → 42), as Iceberg reads it. */
function versionOf(metadataLocation: string): number | undefined {
  const match = /(?:^|\/)(\d+)-[^/]*\.metadata\.json$/.exec(metadataLocation);
  return match === null ? undefined : Number(match[1]);
}

function previousVersionsMax(metadata: TableMetadata): number {
  const value = Number(metadata.properties[PREVIOUS_VERSIONS_MAX] ?? DEFAULT_PREVIOUS_VERSIONS);
  return Number.isSafeInteger(value) && value >= 1 ? value : DEFAULT_PREVIOUS_VERSIONS;
}

/**
 * Check a commit's requirements against the table as it is now, apply its updates and write the new metadata
 * file: everything but the pointer swap. `lock` reads the table's row locked (inside a transaction), so that
 * the swap cannot lose a race afterwards. (Iceberg writes the file before the swap too: a file no commit
 * points to is harmless.)
 */
async function prepareCommit(
  ex: Executor,
  warehouse: Warehouse,
  prefix: string,
  { id, input }: TableCommit,
  lock: boolean,
): Promise<PreparedCommit> {
  const key = id.namespace.join(SEPARATOR);
  const label = [...id.namespace, id.name].join('.');
  const current = await repo.getEntity(ex, prefix, key, id.name, { lock });
  const metadata = current?.kind === 'table' ? (current.metadata as TableMetadata) : undefined;
  checkRequirements(metadata, input.requirements);
  if (current === undefined || metadata === undefined) throw noSuchTable(label);
  const next = applyUpdates(metadata, input.updates, Date.now());
  // The log remembers the file this commit replaces, and at most `previous-versions-max` files in all.
  const log = [
    ...metadata['metadata-log'],
    { 'metadata-file': current.metadataLocation, 'timestamp-ms': metadata['last-updated-ms'] },
  ];
  const keep = previousVersionsMax(next);
  const dropped = log.length > keep ? log.slice(0, log.length - keep) : [];
  next['metadata-log'] = log.slice(dropped.length);
  const version = (versionOf(current.metadataLocation) ?? metadata['metadata-log'].length) + 1;
  const metadataLocation = await warehouse.writeMetadata(next.location, version, next);
  const expired =
    next.properties[DELETE_AFTER_COMMIT] === 'true'
      ? dropped.map((entry) => String((entry as { 'metadata-file'?: unknown })['metadata-file']))
      : [];
  return {
    key,
    name: id.name,
    label,
    expectedLocation: current.metadataLocation,
    metadataLocation,
    next,
    expired,
  };
}

/** Move the table's pointer, only from the metadata its requirements were checked against (locked, so it is). */
async function applyCommit(tx: Executor, prefix: string, change: PreparedCommit): Promise<void> {
  const swapped = await repo.swapEntity(tx, prefix, change.key, change.name, change.expectedLocation, {
    kind: 'table',
    metadataLocation: change.metadataLocation,
    metadata: change.next,
  });
  if (!swapped) throw new ConcurrentChange(change.label);
}

/**
 * Commit changes to one or more tables, all or none, inside the mutation's transaction (after its key is
 * reserved there, so that a retry of a commit that went through replays it rather than meet its own change):
 * each table's row is read locked (in one order, so that two transactions never wait on each other), its
 * requirements checked against the table as it is now, its updates applied and the new metadata written, then
 * the pointers move. As in Iceberg's catalogs, concurrent commits that do not conflict all land, one after the
 * other; a 409 means a requirement failed against the current metadata.
 */
async function commit(
  request: FastifyRequest,
  reply: FastifyReply,
  db: CatalogDatabase,
  warehouse: Warehouse,
  prefix: string,
  commits: readonly TableCommit[],
  answer: (changes: readonly PreparedCommit[]) => Answer,
) {
  const ordered = [...commits].sort((a, b) => {
    const x = [...a.id.namespace, a.id.name].join(SEPARATOR);
    const y = [...b.id.namespace, b.id.name].join(SEPARATOR);
    return x < y ? -1 : x > y ? 1 : 0;
  });
  let changes: PreparedCommit[] = [];
  return mutate(
    request,
    reply,
    db,
    async (tx) => {
      changes = [];
      for (const table of ordered) changes.push(await prepareCommit(tx, warehouse, prefix, table, true));
      for (const change of changes) await applyCommit(tx, prefix, change);
      return answer(commits.map((table) => changes[ordered.indexOf(table)] as PreparedCommit));
    },
    // Files that fell out of the metadata log, once the commit is in.
    async () => {
      for (const file of changes.flatMap((change) => change.expired)) {
        await warehouse
          .removeFile(file)
          .catch((error: unknown) => request.log.warn({ err: error, file }, 'old metadata file not deleted'));
      }
    },
  );
}

/** POST /namespaces/{namespace}/tables/{table}: one table's commit; answers the new metadata. */
export function commitTableHandler(db: CatalogDatabase, warehouse: Warehouse) {
  return async (request: FastifyRequest, reply: FastifyReply) => {
    const { prefix, parts } = namespaceOf(request);
    const name = (request.params as Params).table as string;
    const input = body(request);
    checkUpdateCount(input, 'the commit');
    return commit(
      request,
      reply,
      db,
      warehouse,
      prefix,
      [{ id: { namespace: parts, name }, input }],
      ([change]) => ({
        status: 200,
        body: { 'metadata-location': change?.metadataLocation, metadata: change?.next },
      }),
    );
  };
}

/** POST /transactions/commit: several tables' commits, all or none. */
export function commitTransactionHandler(db: CatalogDatabase, warehouse: Warehouse) {
  return async (request: FastifyRequest, reply: FastifyReply) => {
    const { prefix = '' } = request.params as Params;
    const input = body(request);
    if (!Array.isArray(input['table-changes'])) throw badRequest('table-changes must be an array');
    const commits = (input['table-changes'] as unknown[]).map((change, i) => {
      const table = change as Record<string, unknown>;
      return { id: identifier(table?.identifier, `table-changes[${i}].identifier`), input: table };
    });
    return commit(request, reply, db, warehouse, prefix, commits, () => ({ status: 204 }));
  };
}
