import { sep } from 'node:path';
import { sql } from 'drizzle-orm';
import type { Executor, LockMode, Row } from '../database/executor.js';
import { MAX_STORED_JSON_DEPTH } from './limits.js';
import { parseLosslessJson, stringifyLosslessJson } from './lossless-json.js';

/** Multipart namespaces are stored joined by the unit separator, as the REST spec writes them in paths. */
export const SEPARATOR = '\u001f';

export type EntityKind = 'table' | 'view';

/** A table or view, by where it lives in the catalog. */
export interface EntityName {
  readonly prefix: string;
  readonly namespace: string;
  readonly name: string;
}

export interface Entity {
  readonly kind: EntityKind;
  readonly metadataLocation: string;
  readonly metadata: Record<string, unknown>;
  /**
   * The metadata as JSON text: what the warehouse encoded (`stringifyLosslessJson` of `metadata`) and the
   * database holds, so that an answer carries it as it is (http/answer.ts `metadataAnswerText`).
   */
  readonly text: string;
}

/**
 * An entity to store, with the real path of its location in the warehouse (`Warehouse.pathOf`), which a purge
 * checks others against.
 */
export interface NewEntity extends Entity {
  readonly path: string | null;
}

// MySQL returns VARBINARY columns as Buffers.
const text = (value: unknown): string => (Buffer.isBuffer(value) ? value.toString('utf8') : String(value));

// Metadata is stored as JSON text, its longs as exact digits (a bigint past 2^53), and read back the same way.
const fromColumn = (value: unknown) => parseLosslessJson(text(value), { maxDepth: MAX_STORED_JSON_DEPTH });

/** An entity as read: its metadata parsed when first asked for (a load answers with the stored text alone). */
function toEntity(row: Row): Entity {
  const stored = text(row.metadata);
  let metadata: Record<string, unknown> | undefined;
  return {
    kind: text(row.kind) as EntityKind,
    metadataLocation: text(row.metadata_location),
    text: stored,
    get metadata() {
      metadata ??= fromColumn(stored) as Record<string, unknown>;
      return metadata;
    },
  };
}

/**
 * The namespace's properties, or undefined when it does not exist. With `lock`, inside a transaction, its row
 * stays locked until the transaction ends: `share` where the namespace must go on existing while something is
 * made in it (a table, a view, a child namespace), `update` where it is changed or dropped. A drop and a create
 * in it then take turns, and each sees what the other committed.
 */
export async function getNamespace(
  ex: Executor,
  prefix: string,
  namespace: string,
  options: { readonly lock?: LockMode } = {},
) {
  const [row] = await ex.rows(
    sql`SELECT properties FROM catalog_namespaces WHERE prefix = ${prefix} AND namespace = ${namespace}${
      options.lock === undefined ? sql`` : ex.lock(options.lock)
    }`,
  );
  return row === undefined ? undefined : (fromColumn(row.properties) as Record<string, string>);
}

export async function listNamespaces(ex: Executor, prefix: string): Promise<string[]> {
  const rows = await ex.rows(
    sql`SELECT namespace FROM catalog_namespaces WHERE prefix = ${prefix} ORDER BY namespace`,
  );
  return rows.map((row: Row) => text(row.namespace));
}

export async function insertNamespace(ex: Executor, prefix: string, namespace: string, properties: object) {
  await ex.run(
    sql`INSERT INTO catalog_namespaces (prefix, namespace, properties) VALUES (${prefix}, ${namespace}, ${stringifyLosslessJson(properties)})`,
  );
}

export async function setNamespaceProperties(
  ex: Executor,
  prefix: string,
  namespace: string,
  properties: object,
) {
  return ex.run(
    sql`UPDATE catalog_namespaces SET properties = ${stringifyLosslessJson(properties)} WHERE prefix = ${prefix} AND namespace = ${namespace}`,
  );
}

export async function deleteNamespace(ex: Executor, prefix: string, namespace: string) {
  return ex.run(sql`DELETE FROM catalog_namespaces WHERE prefix = ${prefix} AND namespace = ${namespace}`);
}

/** `text` as a LIKE pattern that matches it literally (with `ESCAPE '!'`). */
const literal = (text: string) => text.replace(/[!%_]/g, (c) => `!${c}`);

/**
 * Whether anything lives in the namespace: entities, or child namespaces. Called by a drop holding the
 * namespace's row locked (`update`): both reads lock what they find (`share`), which on MySQL also makes them
 * read the latest committed rows rather than the transaction's snapshot, taken before the lock was granted.
 */
export async function namespaceIsEmpty(ex: Executor, prefix: string, namespace: string): Promise<boolean> {
  const entities = await ex.rows(
    sql`SELECT 1 FROM catalog_entities WHERE prefix = ${prefix} AND namespace = ${namespace} LIMIT 1${ex.lock('share')}`,
  );
  if (entities.length > 0) return false;
  // Children only (not every namespace of the prefix, some of which another drop may hold): LIKE narrows them
  // down, and startsWith decides, since SQLite's LIKE ignores the case of ASCII letters.
  const children = await ex.rows(
    sql`SELECT namespace FROM catalog_namespaces
      WHERE prefix = ${prefix} AND namespace LIKE ${`${literal(namespace + SEPARATOR)}%`} ESCAPE '!'${ex.lock('share')}`,
  );
  return !children.some((row) => text(row.namespace).startsWith(namespace + SEPARATOR));
}

/**
 * The entity named `name` in the namespace. With `lock`, inside a transaction, its row stays locked until the
 * transaction ends (`update`; SQLite's transactions hold the whole database anyway), so that what is read is
 * what the transaction changes.
 */
export async function getEntity(
  ex: Executor,
  { prefix, namespace, name }: EntityName,
  options: { readonly lock?: LockMode } = {},
): Promise<Entity | undefined> {
  const [row] = await ex.rows(
    sql`SELECT kind, metadata_location, metadata FROM catalog_entities
      WHERE prefix = ${prefix} AND namespace = ${namespace} AND name = ${name}${
        options.lock === undefined ? sql`` : ex.lock(options.lock)
      }`,
  );
  return row === undefined ? undefined : toEntity(row);
}

export async function listEntities(ex: Executor, prefix: string, namespace: string, kind: EntityKind) {
  const rows = await ex.rows(
    sql`SELECT name FROM catalog_entities WHERE prefix = ${prefix} AND namespace = ${namespace} AND kind = ${kind}
      ORDER BY name`,
  );
  return rows.map((row) => text(row.name));
}

/** The table-uuid or view-uuid of an entity's metadata. */
const uuidOf = (entity: Entity): string =>
  String(entity.metadata['table-uuid'] ?? entity.metadata['view-uuid'] ?? '');

export async function insertEntity(ex: Executor, { prefix, namespace, name }: EntityName, entity: NewEntity) {
  await ex.run(
    sql`INSERT INTO catalog_entities (prefix, namespace, name, kind, uuid, metadata_location, metadata, location)
      VALUES (${prefix}, ${namespace}, ${name}, ${entity.kind}, ${uuidOf(entity)}, ${entity.metadataLocation},
        ${entity.text}, ${entity.path})`,
  );
}

/** The current state of the table or view with this UUID in the catalog prefix, wherever it lives now. */
export async function getEntityByUuid(
  ex: Executor,
  prefix: string,
  uuid: string,
): Promise<Entity | undefined> {
  const [row] = await ex.rows(
    sql`SELECT kind, metadata_location, metadata FROM catalog_entities WHERE prefix = ${prefix} AND uuid = ${uuid}`,
  );
  return row === undefined ? undefined : toEntity(row);
}

/** Swap the metadata pointer only if it is still `expectedLocation`: the commit's optimistic lock. */
export async function swapEntity(
  ex: Executor,
  { prefix, namespace, name }: EntityName,
  expectedLocation: string,
  entity: NewEntity,
): Promise<boolean> {
  const changed = await ex.run(
    sql`UPDATE catalog_entities SET uuid = ${uuidOf(entity)}, metadata_location = ${entity.metadataLocation},
      metadata = ${entity.text}, location = ${entity.path}
      WHERE prefix = ${prefix} AND namespace = ${namespace} AND name = ${name} AND metadata_location = ${expectedLocation}`,
  );
  return changed === 1;
}

export async function deleteEntity(ex: Executor, { prefix, namespace, name }: EntityName, kind: EntityKind) {
  return ex.run(
    sql`DELETE FROM catalog_entities WHERE prefix = ${prefix} AND namespace = ${namespace} AND name = ${name} AND kind = ${kind}`,
  );
}

/** Move the `kind` entity at `from` to `to`, in the same catalog prefix. */
export async function renameEntity(
  ex: Executor,
  from: EntityName,
  to: Omit<EntityName, 'prefix'>,
  kind: EntityKind,
) {
  return ex.run(
    sql`UPDATE catalog_entities SET namespace = ${to.namespace}, name = ${to.name}
      WHERE prefix = ${from.prefix} AND namespace = ${from.namespace} AND name = ${from.name} AND kind = ${kind}`,
  );
}

/**
 * The tables and views, in every catalog prefix (they share the warehouse), whose location is the directory
 * `path` (a real path), lies inside it or contains it (`ancestors`: every directory above `path`), and those
 * whose location the catalog does not know (rows an older server wrote): what a purge of `path` could delete
 * files of.
 */
export async function entitiesAround(
  ex: Executor,
  path: string,
  ancestors: readonly string[],
): Promise<EntityName[]> {
  const below = path.endsWith(sep) ? path : path + sep;
  const rows = await ex.rows(
    sql`SELECT prefix, namespace, name, location FROM catalog_entities
      WHERE location IS NULL OR location = ${path} OR location LIKE ${`${literal(below)}%`} ESCAPE '!'${
        ancestors.length === 0
          ? sql``
          : sql` OR location IN (${sql.join(
              ancestors.map((ancestor) => sql`${ancestor}`),
              sql`, `,
            )})`
      }`,
  );
  return rows
    .filter((row) => {
      // SQLite's LIKE ignores the case of ASCII letters: decide exactly here.
      const location = row.location === null ? null : text(row.location);
      return (
        location === null || location === path || location.startsWith(below) || ancestors.includes(location)
      );
    })
    .map((row) => ({ prefix: text(row.prefix), namespace: text(row.namespace), name: text(row.name) }));
}
