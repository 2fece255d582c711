import { basename, dirname, join } from 'node:path';
import { databaseErrorKind } from '../database/error-kind.js';
import type { Executor } from '../database/executor.js';
import {
  alreadyExists,
  badRequest,
  ConcurrentChange,
  commitFailed,
  noSuchNamespace,
  noSuchTable,
} from './iceberg-error.js';
import { ancestorsOf } from './paths.js';
import * as repo from './repository.js';
import { SEPARATOR } from './repository.js';
import {
  applyUpdatesTo,
  checkRequirements,
  createdTableMetadata,
  createsTable,
  type TableMetadata,
} from './table-metadata.js';
import type { Warehouse } from './warehouse.js';

/** Table properties that shape the metadata log, with Iceberg's defaults. */
const PREVIOUS_VERSIONS_MAX = 'write.metadata.previous-versions-max';
const DEFAULT_PREVIOUS_VERSIONS = 100;
const DELETE_AFTER_COMMIT = 'write.metadata.delete-after-commit.enabled';

/** One table's part of a commit, as the client sent it. */
export interface TableCommit {
  readonly id: { readonly namespace: string[]; readonly name: string };
  readonly input: Record<string, unknown>;
}

/** A commit checked and applied in memory: nothing is written yet. */
interface PreparedCommit {
  readonly key: string;
  readonly name: string;
  readonly label: string;
  /** The metadata-location the pointer moves from; undefined for a commit that creates its table. */
  readonly expectedLocation: string | undefined;
  readonly version: number;
  readonly next: TableMetadata;
  /** Metadata files that fell out of the log and are deleted once the commit is in. */
  readonly expired: readonly string[];
}

/** A commit whose new metadata file is written: only the pointer is left to move. */
export interface WrittenCommit extends PreparedCommit {
  readonly metadataLocation: string;
  /** `next` as written to the file (and stored). */
  readonly text: string;
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
export const tableKey = ({ id }: TableCommit) => [...id.namespace, id.name].join(SEPARATOR);

/**
 * Check a commit's requirements against the table as it is now (its row read locked, inside the transaction,
 * so that the swap cannot lose a race afterwards) and apply its updates, in memory. A commit that creates its
 * table is {@link prepareCreate}'s.
 */
async function prepareCommit(
  tx: Executor,
  warehouse: Warehouse,
  prefix: string,
  { id, input }: TableCommit,
  creates: boolean,
): Promise<PreparedCommit> {
  const key = id.namespace.join(SEPARATOR);
  const label = [...id.namespace, id.name].join('.');
  if (creates) return prepareCreate(tx, warehouse, prefix, { id, input }, { key, label });
  const current = await repo.getEntity(tx, { prefix, namespace: key, name: id.name }, { lock: 'update' });
  const metadata = current?.kind === 'table' ? (current.metadata as TableMetadata) : undefined;
  checkRequirements(metadata, input.requirements);
  if (current === undefined || metadata === undefined) throw noSuchTable(label);
  // The log remembers the file this commit replaces, and at most `previous-versions-max` files in all.
  const log = [
    ...metadata['metadata-log'],
    { 'metadata-file': current.metadataLocation, 'timestamp-ms': metadata['last-updated-ms'] },
  ];
  const version = (versionOf(current.metadataLocation) ?? metadata['metadata-log'].length) + 1;
  // Parsed from the table's row for this commit alone: updated where it is, not copied first.
  const next = applyUpdatesTo(metadata, input.updates, Date.now());
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
    version,
    next,
    expired,
  };
}

/**
 * A commit that creates its table (Iceberg's create transaction: `assert-create`, see table-metadata.ts
 * `createsTable`), checked and built in memory: the name must be free, of tables and views alike (409), in a
 * namespace that exists, which stays share-locked until the table is in, as a create's does ({@link
 * commitTables} locks it, or answers 404, before any table's row); the updates build the whole metadata
 * from an empty base (400 otherwise), whose uuid no other table or view of the prefix has (a replay finds a
 * created table by it) and whose location is inside the warehouse (403), all before any file is written. The
 * name is read without a lock: there is no row to lock, and on MySQL a locking read of a missing row locks the
 * gap, where two creates of one name would deadlock; the insert decides between them (see {@link commitTables}).
 */
async function prepareCreate(
  tx: Executor,
  warehouse: Warehouse,
  prefix: string,
  { id, input }: TableCommit,
  { key, label }: { key: string; label: string },
): Promise<PreparedCommit> {
  const current = await repo.getEntity(tx, { prefix, namespace: key, name: id.name });
  if (current?.kind === 'view') throw alreadyExists(`View ${label}`);
  // A table of the name: Iceberg's 409 for it (AssertTableDoesNotExist), CommitFailedException.
  checkRequirements(
    current === undefined ? undefined : (current.metadata as TableMetadata),
    input.requirements,
  );
  const next = createdTableMetadata(input.updates, Date.now());
  if ((await repo.getEntityByUuid(tx, prefix, next['table-uuid'])) !== undefined)
    throw commitFailed(`Requirement failed: a table or view with uuid ${next['table-uuid']} already exists`);
  await warehouse.check(next.location, 'location');
  return { key, name: id.name, label, expectedLocation: undefined, version: 0, next, expired: [] };
}

/** Insert a table that a commit creates: a name taken meanwhile by a concurrent create is the requirement's 409. */
async function insertCreated(tx: Executor, name: repo.EntityName, entity: repo.NewEntity, label: string) {
  try {
    await repo.insertEntity(tx, name, entity);
  } catch (error) {
    if (databaseErrorKind(error) === 'conflict')
      throw commitFailed(`Requirement failed: ${label} was created concurrently`);
    throw error;
  }
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

/** What {@link commitTables} takes. */
export interface CommitTablesOptions {
  /** The mutation's transaction, the request's key already reserved in it. */
  readonly tx: Executor;
  readonly warehouse: Warehouse;
  /** The catalog prefix ('' without one). */
  readonly prefix: string;
  /** Each table's part, in the request's order; no table twice. */
  readonly commits: readonly TableCommit[];
}

/** A commit made in the transaction: it holds once the transaction commits. */
export interface CommittedTables {
  /** Each table's commit, in the request's order. */
  readonly changes: readonly WrittenCommit[];
  /** Metadata files that fell out of the logs and are the tables' own: deleted once the commit is in. */
  readonly expired: readonly string[];
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
 *
 * A table's commit may create it (`assert-create`: Iceberg's create transaction, see {@link prepareCreate}): its
 * metadata is built from nothing, written as version 0 and inserted, as a create's; of two concurrent creates of
 * one name, the insert of the second is a 409, and its file is removed with the rest.
 */
export async function commitTables({
  tx,
  warehouse,
  prefix,
  commits,
}: CommitTablesOptions): Promise<CommittedTables> {
  const ordered = commits
    .map((table, index) => ({
      table,
      index,
      key: tableKey(table),
      creates: createsTable(table.input.requirements),
    }))
    .sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  // The namespaces of the tables created, share-locked before any table's row (in one order): a drop of one
  // waits, then finds it not empty. Locked after a table's row, a drop holding the namespace and waiting on
  // that row would deadlock with this commit.
  const namespaces = [
    ...new Set(ordered.filter((c) => c.creates).map((c) => c.table.id.namespace.join(SEPARATOR))),
  ].sort();
  for (const namespace of namespaces)
    if ((await repo.getNamespace(tx, prefix, namespace, { lock: 'share' })) === undefined)
      throw noSuchNamespace(namespace.split(SEPARATOR).join('.'));
  const prepared: PreparedCommit[] = [];
  for (const { table, creates } of ordered)
    prepared.push(await prepareCommit(tx, warehouse, prefix, table, creates));
  // Nor two tables of one commit created with one uuid.
  const uuids = new Set<string>();
  for (const change of prepared.filter((c) => c.expectedLocation === undefined)) {
    if (uuids.has(change.next['table-uuid']))
      throw badRequest(`two tables of the commit would be created with uuid ${change.next['table-uuid']}`);
    uuids.add(change.next['table-uuid']);
  }
  const texts = prepared.map((change) => warehouse.encode(change.next));
  const written: WrittenCommit[] = [];
  const files = () => written.map((change) => change.metadataLocation);
  // A later table's file that cannot be written, or a pointer the database refuses: the files written so far go.
  await unwrittenOnFailure(warehouse, files, async () => {
    for (const [i, change] of prepared.entries()) {
      const { metadataLocation, path } = await warehouse.writeMetadata(
        change.next.location,
        change.version,
        texts[i] as string,
      );
      written.push({ ...change, metadataLocation, path, text: texts[i] as string });
    }
    for (const change of written) {
      const name = { prefix, namespace: change.key, name: change.name };
      const entity = {
        kind: 'table' as const,
        metadataLocation: change.metadataLocation,
        metadata: change.next,
        text: change.text,
        path: change.path,
      };
      // A new table: inserted, as a create's is (a concurrent create of the name: this one's file goes).
      if (change.expectedLocation === undefined) await insertCreated(tx, name, entity, change.label);
      // Locked above: the pointer is still where the requirements were checked.
      else if (!(await repo.swapEntity(tx, name, change.expectedLocation, entity)))
        throw new ConcurrentChange(change.label);
    }
  });
  const expired: string[] = [];
  for (const change of written) expired.push(...(await ownFiles(tx, warehouse, prefix, change)));
  const changes: WrittenCommit[] = [];
  for (const [i, { index }] of ordered.entries()) changes[index] = written[i] as WrittenCommit;
  return { changes, expired };
}

/**
 * `then`, after metadata files were written for a change that has not committed (`files`: those written so far):
 * when it fails (a name taken meanwhile, a value the database refuses, a later file that cannot be written, a
 * fault), the files are removed again, so that a change that did not commit leaves none behind. Nothing refers to
 * them: the transaction that would have rolls back. Only for files the catalog wrote, never a registered one.
 */
export async function unwrittenOnFailure<T>(
  warehouse: Warehouse,
  files: () => readonly string[],
  then: () => Promise<T>,
): Promise<T> {
  try {
    return await then();
  } catch (error) {
    await removeFiles(warehouse, files(), () => {});
    throw error;
  }
}

/**
 * Delete metadata files: those a committed commit's logs let go of ({@link CommittedTables.expired}), or those of
 * a change that did not commit. What was done stands whatever happens here: a file that cannot be deleted is told
 * to `onFailure` and left.
 */
export async function removeFiles(
  warehouse: Warehouse,
  files: readonly string[],
  onFailure: (error: unknown, file: string) => void,
): Promise<void> {
  for (const file of files)
    await warehouse.removeFile(file).catch((error: unknown) => onFailure(error, file));
}
