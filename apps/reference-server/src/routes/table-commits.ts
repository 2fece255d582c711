import { basename, dirname, join } from 'node:path';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { badRequest, ConcurrentChange, noSuchTable } from '../catalog/iceberg-error.js';
import { MAX_TABLE_CHANGES } from '../catalog/limits.js';
import { ancestorsOf } from '../catalog/paths.js';
import * as repo from '../catalog/repository.js';
import { SEPARATOR } from '../catalog/repository.js';
import { applyUpdates, checkRequirements, type TableMetadata } from '../catalog/table-metadata.js';
import type { Warehouse } from '../catalog/warehouse.js';
import type { CatalogDatabase } from '../database/catalog-database.js';
import type { Executor } from '../database/executor.js';
import type { Answer } from '../http/answer.js';
import { mutate } from '../idempotency/mutate.js';
import { body, checkUpdateCount, identifier, namespaceOf, type Params } from './parse.js';

/** Table properties that shape the metadata log, with Iceberg's defaults. */
const PREVIOUS_VERSIONS_MAX = 'write.metadata.previous-versions-max';
const DEFAULT_PREVIOUS_VERSIONS = 100;
const DELETE_AFTER_COMMIT = 'write.metadata.delete-after-commit.enabled';

/** One table's part of a commit, as the client sent it. */
interface TableCommit {
  readonly id: { readonly namespace: string[]; readonly name: string };
  readonly input: Record<string, unknown>;
}

/** A commit checked and applied in memory: nothing is written yet. */
interface PreparedCommit {
  readonly key: string;
  readonly name: string;
  readonly label: string;
  readonly expectedLocation: string;
  readonly version: number;
  readonly next: TableMetadata;
  /** Metadata files that fell out of the log and are deleted once the commit is in. */
  readonly expired: readonly string[];
}

/** A commit whose new metadata file is written: only the pointer is left to move. */
interface WrittenCommit extends PreparedCommit {
  readonly metadataLocation: string;
  /** The real path of the table's location (see repo.NewEntity). */
  readonly path: string;
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

/** The table's identity in one string: names hold no control characters, so U+001F separates unambiguously. */
const tableKey = ({ id }: TableCommit) => [...id.namespace, id.name].join(SEPARATOR);

/**
 * Check a commit's requirements against the table as it is now (its row read locked, inside the transaction,
 * so that the swap cannot lose a race afterwards) and apply its updates, in memory.
 */
async function prepareCommit(
  tx: Executor,
  prefix: string,
  { id, input }: TableCommit,
): Promise<PreparedCommit> {
  const key = id.namespace.join(SEPARATOR);
  const label = [...id.namespace, id.name].join('.');
  const current = await repo.getEntity(tx, prefix, key, id.name, { lock: 'update' });
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
  const expired =
    next.properties[DELETE_AFTER_COMMIT] === 'true'
      ? dropped.map((entry) => String((entry as { 'metadata-file'?: unknown })['metadata-file']))
      : [];
  return {
    key,
    name: id.name,
    label,
    expectedLocation: current.metadataLocation,
    version: (versionOf(current.metadataLocation) ?? metadata['metadata-log'].length) + 1,
    next,
    expired,
  };
}

// The name the catalog gives the metadata files it writes (warehouse.writeMetadata).
const OWN_FILE_NAME = /^\d{5,}-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\.metadata\.json$/;

/**
 * The expired files of a commit that are this table's own: files the catalog wrote into the metadata directory
 * of the table's location, where no other table or view lives. The log is the client's to write (a registered
 * file brings its own), so a file named there is deleted only when it is one of these; never another table's
 * current metadata, nor anything else in the warehouse.
 */
async function ownFiles(
  tx: Executor,
  warehouse: Warehouse,
  prefix: string,
  change: WrittenCommit,
): Promise<string[]> {
  if (change.expired.length === 0) return [];
  const around = await repo.entitiesAround(tx, change.path, ancestorsOf(change.path));
  const itself = (entity: repo.EntityName) =>
    entity.prefix === prefix && entity.namespace === change.key && entity.name === change.name;
  if (!around.every(itself)) return [];
  const metadataDirectory = join(change.path, 'metadata');
  const own: string[] = [];
  for (const file of change.expired) {
    const path = await warehouse.pathOf(file, 'metadata-file').catch(() => undefined);
    if (path !== undefined && dirname(path) === metadataDirectory && OWN_FILE_NAME.test(basename(path)))
      own.push(file);
  }
  return own;
}

/**
 * Commit changes to one or more tables, all or none, inside the mutation's transaction (after its key is
 * reserved there, so that a retry of a commit that went through replays it rather than meet its own change).
 * Every table's row is read locked (in one order, so that two transactions never wait on each other), its
 * requirements checked against the table as it is now and its updates applied, all in memory; only when every
 * table has passed is each new metadata encoded (a 400 when one is larger than the catalog holds), then every
 * file written, then the pointers moved. A refused commit writes nothing. As in Iceberg's catalogs, concurrent
 * commits that do not conflict all land, one after the other; a 409 means a requirement failed against the
 * current metadata.
 */
async function commit(
  request: FastifyRequest,
  reply: FastifyReply,
  db: CatalogDatabase,
  warehouse: Warehouse,
  prefix: string,
  commits: readonly TableCommit[],
  answer: (changes: readonly WrittenCommit[]) => Answer,
) {
  const ordered = commits
    .map((table, index) => ({ table, index, key: tableKey(table) }))
    .sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  let expired: string[] = [];
  return mutate(
    reply,
    db,
    async (tx) => {
      const prepared: PreparedCommit[] = [];
      for (const { table } of ordered) prepared.push(await prepareCommit(tx, prefix, table));
      const texts = prepared.map((change) => warehouse.encode(change.next));
      const written: WrittenCommit[] = [];
      for (const [i, change] of prepared.entries()) {
        const metadataLocation = await warehouse.writeMetadata(
          change.next.location,
          change.version,
          texts[i] as string,
        );
        const path = await warehouse.pathOf(change.next.location, 'location');
        written.push({ ...change, metadataLocation, path });
      }
      for (const [i, change] of written.entries()) {
        // Locked above: the pointer is still where the requirements were checked.
        const swapped = await repo.swapEntity(tx, prefix, change.key, change.name, change.expectedLocation, {
          kind: 'table',
          metadataLocation: change.metadataLocation,
          metadata: change.next,
          text: texts[i] as string,
          path: change.path,
        });
        if (!swapped) throw new ConcurrentChange(change.label);
      }
      expired = [];
      for (const change of written) expired.push(...(await ownFiles(tx, warehouse, prefix, change)));
      const inRequestOrder: WrittenCommit[] = [];
      for (const [i, { index }] of ordered.entries()) inRequestOrder[index] = written[i] as WrittenCommit;
      return answer(inRequestOrder);
    },
    // Files that fell out of the metadata log, once the commit is in.
    async () => {
      for (const file of expired) {
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
    const changes = input['table-changes'];
    if (!Array.isArray(changes)) throw badRequest('table-changes must be an array');
    // Shape checks, before the key is reserved: each change is a table read locked, checked and rewritten in
    // the one transaction, so their number is bounded, and a table named twice would be checked against a
    // state its own first change replaces (and write a file per naming).
    if (changes.length > MAX_TABLE_CHANGES)
      throw badRequest(`table-changes must have at most ${MAX_TABLE_CHANGES} changes, got ${changes.length}`);
    const seen = new Set<string>();
    const commits = changes.map((change, i): TableCommit => {
      const table = change as Record<string, unknown>;
      const commit = { id: identifier(table?.identifier, `table-changes[${i}].identifier`), input: table };
      const key = tableKey(commit);
      if (seen.has(key))
        throw badRequest(
          `table-changes[${i}] names ${[...commit.id.namespace, commit.id.name].join('.')} again`,
        );
      seen.add(key);
      checkUpdateCount(table, `table-changes[${i}]`);
      return commit;
    });
    return commit(request, reply, db, warehouse, prefix, commits, () => ({ status: 204 }));
  };
}
