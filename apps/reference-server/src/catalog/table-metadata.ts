import { randomUUID } from 'node:crypto';
import { badRequest, commitFailed } from './iceberg-error.js';
import { idsOf } from './id-set.js';
import {
  entityLocationProblem,
  INT32_MAX,
  MAX_PARTITION_SPECS,
  MAX_SCHEMAS,
  MAX_SORT_ORDERS,
} from './limits.js';
import { addLongs, isLong, type Long, maxLong, sameLong } from './long.js';
import { localPath } from './paths.js';

// Table metadata as the Iceberg table spec defines it (format versions 1 and 2; 3 where it costs nothing).
// Objects stay plain JSON: the catalog stores and returns them as clients sent them, and only reads the
// fields that its bookkeeping needs. Longs (snapshot ids, sequence numbers, row ids) are exact: a number or, past
// 2^53, a bigint (see long.ts); they are compared and computed only through long.ts.
type Json = Record<string, unknown>;
export type TableMetadata = Json & {
  'format-version': number;
  'table-uuid': string;
  location: string;
  'last-updated-ms': number;
  'last-column-id': number;
  schemas: Json[];
  'current-schema-id': number;
  'partition-specs': Json[];
  'default-spec-id': number;
  'last-partition-id': number;
  'sort-orders': Json[];
  'default-sort-order-id': number;
  properties: Record<string, string>;
  /** Absent while the table has no current snapshot (the spec allows no null here; Java writes -1). */
  'current-snapshot-id'?: Long;
  snapshots: Json[];
  refs: Record<string, Json>;
  'snapshot-log': Json[];
  'metadata-log': Json[];
  'last-sequence-number': Long;
};

const PARTITION_FIELD_BASE = 1000;

function object(value: unknown, field: string): Json {
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw badRequest(`${field} must be an object`);
  return value as Json;
}

function integer(value: unknown, field: string): number {
  if (!Number.isSafeInteger(value)) throw badRequest(`${field} must be an integer`);
  return value as number;
}

function long(value: unknown, field: string): Long {
  if (!isLong(value)) throw badRequest(`${field} must be a 64-bit integer`);
  return value;
}

/** `a + b`, refused past int64: a value the catalog cannot hold is the caller's error. */
function sum(a: Long, b: Long, field: string): Long {
  const total = addLongs(a, b);
  if (total === undefined) throw badRequest(`${field} would pass the largest 64-bit integer`);
  return total;
}

function string(value: unknown, field: string): string {
  if (typeof value !== 'string') throw badRequest(`${field} must be a string`);
  return value;
}

function stringMap(value: unknown, field: string): Record<string, string> {
  const map = object(value, field);
  for (const [key, item] of Object.entries(map)) string(item, `${field}.${key}`);
  return map as Record<string, string>;
}

/**
 * The id after `max`, for an id the catalog assigns as the highest so far plus one (a schema, partition spec,
 * partition field, sort order or view version id). Every such id is a Java `int` in Iceberg, and the catalog
 * reads none past int32 back (limits.ts): the update that would need one is refused instead.
 */
export function nextId(max: number, what: string): number {
  if (max >= INT32_MAX)
    throw badRequest(`no ${what} is left to assign: the next would pass the largest 32-bit integer`);
  return max + 1;
}

/**
 * Every field id of a type, in order: struct fields (and their own types), list element ids, map key and value
 * ids, at any depth. Ids that are not integers are left out (the request's validation has refused them).
 */
function fieldIds(type: unknown, ids: number[] = []): number[] {
  if (typeof type !== 'object' || type === null) return ids;
  const node = type as Json;
  for (const field of Array.isArray(node.fields) ? (node.fields as unknown[]) : []) {
    if (typeof field !== 'object' || field === null) continue;
    const { id, type: fieldType } = field as Json;
    if (Number.isSafeInteger(id)) ids.push(id as number);
    fieldIds(fieldType, ids);
  }
  for (const key of ['element-id', 'key-id', 'value-id'])
    if (Number.isSafeInteger(node[key])) ids.push(node[key] as number);
  for (const key of ['element', 'key', 'value']) fieldIds(node[key], ids);
  return ids;
}

/** The highest field id in a schema, nested struct, list and map fields included. */
function maxFieldId(type: unknown): number {
  let max = 0;
  for (const id of fieldIds(type)) if (id > max) max = id;
  return max;
}

/**
 * Refuse a schema (table or view) in which two fields share an id, at whatever depth either is (struct fields,
 * list elements, map keys and values), as Iceberg's own Schema does: an id names one field.
 */
export function checkFieldIds(schema: Json, field: string): void {
  const seen = new Set<number>();
  for (const id of fieldIds(schema)) {
    if (seen.has(id)) throw badRequest(`${field} has more than one field with id ${id}`);
    seen.add(id);
  }
}

function checkSchema(schema: unknown, field: string): Json {
  const value = object(schema, field);
  if (value.type !== 'struct' || !Array.isArray(value.fields))
    throw badRequest(`${field} must be a struct schema with fields`);
  for (const [i, f] of (value.fields as unknown[]).entries()) {
    const column = object(f, `${field}.fields[${i}]`);
    integer(column.id, `${field}.fields[${i}].id`);
    string(column.name, `${field}.fields[${i}].name`);
    if (typeof column.required !== 'boolean')
      throw badRequest(`${field}.fields[${i}].required must be a boolean`);
    if (column.type === undefined) throw badRequest(`${field}.fields[${i}].type is required`);
  }
  checkFieldIds(value, field);
  return value;
}

/**
 * The field ids a partition spec or sort order may take its sources from. Iceberg's Java TableMetadata.Builder
 * binds an added spec or sort order (`addPartitionSpec` / `addSortOrder` of an unbound one) to the table's
 * current schema at that point of the commit (`schemasById.get(currentSchemaId)`), and binding refuses a source
 * id that schema does not have ("Cannot find source column"); a new table's are bound to its schema. Any field
 * of the schema counts, nested ones included (Schema.findField).
 */
function sourceIdsOf(schema: Json): ReadonlySet<number> {
  return new Set(fieldIds(schema));
}

function checkSourceId(field: Json, columns: ReadonlySet<number>, at: string): void {
  const source = integer(field['source-id'], `${at}.source-id`);
  if (!columns.has(source))
    throw badRequest(`${at}.source-id ${source} is no field of the table's current schema`);
}

/**
 * Partition fields get ids from 1000 on, as the spec assigns them, unless the client chose them; each field's
 * source must be a field of `columns` ({@link sourceIdsOf}).
 */
function withPartitionFieldIds(
  spec: Json,
  lastPartitionId: number,
  columns: ReadonlySet<number>,
  label: string,
): { spec: Json; last: number } {
  let last = lastPartitionId;
  const fields = ((spec.fields as Json[] | undefined) ?? []).map((f, i) => {
    const field = object(f, `${label}.fields[${i}]`);
    string(field.name, `${label}.fields[${i}].name`);
    string(field.transform, `${label}.fields[${i}].transform`);
    checkSourceId(field, columns, `${label}.fields[${i}]`);
    const id =
      field['field-id'] === undefined
        ? nextId(last, 'partition field id')
        : integer(field['field-id'], `${label}.fields[${i}].field-id`);
    last = Math.max(last, id);
    return { ...field, 'field-id': id };
  });
  return { spec: { ...spec, fields }, last };
}

/** A sort order whose every field's source is a field of `columns` ({@link sourceIdsOf}). */
function checkSortOrder(order: Json, columns: ReadonlySet<number>, label: string): Json {
  const fields = order.fields ?? [];
  if (!Array.isArray(fields)) throw badRequest(`${label}.fields must be an array`);
  for (const [i, f] of fields.entries())
    checkSourceId(object(f, `${label}.fields[${i}]`), columns, `${label}.fields[${i}]`);
  return order;
}

/**
 * A table's or view's location (`field` of a request or of a registered file), refused unless it names a local
 * path of at most MAX_ENTITY_LOCATION_BYTES: the location of every metadata file the catalog writes under it is
 * then one it takes back (limits.ts). Checked where a location enters metadata (a create, `set-location`, a
 * registration), before any file is written.
 */
export function checkEntityLocation(location: string, field: string): string {
  const problem = entityLocationProblem(localPath(location, field));
  if (problem !== undefined) throw badRequest(`${field} ${problem}`);
  return location;
}

/** The metadata of a new table from a CreateTableRequest. */
export function newTableMetadata(request: Json, location: string, nowMs: number): TableMetadata {
  checkEntityLocation(location, 'location');
  const schema = { ...checkSchema(request.schema, 'schema'), 'schema-id': 0 };
  const columns = sourceIdsOf(schema);
  const partition = withPartitionFieldIds(
    {
      'spec-id': 0,
      ...(request['partition-spec'] === undefined
        ? { fields: [] }
        : object(request['partition-spec'], 'partition-spec')),
    },
    PARTITION_FIELD_BASE - 1,
    columns,
    'partition-spec',
  );
  const order =
    request['write-order'] === undefined
      ? { fields: [] }
      : checkSortOrder(object(request['write-order'], 'write-order'), columns, 'write-order');
  // Ids the catalog assigns, whatever the client sent, as Iceberg's new table metadata does: 0 is reserved for the
  // unsorted order (Iceberg's readers refuse an unsorted order of another id, or a sorted one of id 0), a sorted
  // one is 1.
  const writeOrder = { ...order, 'order-id': isUnsorted(order) ? 0 : 1 };
  const properties = request.properties === undefined ? {} : stringMap(request.properties, 'properties');
  const formatVersion = Number(properties['format-version'] ?? 2);
  if (![1, 2, 3].includes(formatVersion)) throw badRequest(`unsupported format-version ${formatVersion}`);
  return withVersionFields({
    'format-version': formatVersion,
    'table-uuid': randomUUID(),
    location,
    'last-updated-ms': nowMs,
    'last-column-id': maxFieldId(schema),
    schemas: [schema],
    'current-schema-id': 0,
    'partition-specs': [{ ...partition.spec, 'spec-id': 0 }],
    'default-spec-id': 0,
    'last-partition-id': partition.last,
    'sort-orders': [writeOrder],
    'default-sort-order-id': writeOrder['order-id'],
    properties,
    ...noHistory(),
  });
}

/** A table's history before its first snapshot: no snapshots, refs or logs (fresh objects: commits update them). */
const noHistory = () => ({
  snapshots: [],
  refs: {},
  'snapshot-log': [],
  'metadata-log': [],
  'last-sequence-number': 0,
});

/** Fields a commit reads, beyond the two the spec requires of any TableMetadata. */
const REGISTER_REQUIRED = [
  'location',
  'last-updated-ms',
  'last-column-id',
  'schemas',
  'current-schema-id',
  'partition-specs',
  'default-spec-id',
  'last-partition-id',
  'sort-orders',
  'default-sort-order-id',
] as const;

/**
 * Table metadata read from a file a client registers (already valid against the spec's TableMetadata):
 * refused when it lacks what commits need, its optional logs and maps filled in when absent.
 */
export function registeredTableMetadata(document: unknown): TableMetadata {
  const value = object(document, 'metadata');
  const missing = REGISTER_REQUIRED.filter((field) => value[field] === undefined);
  if (missing.length > 0)
    throw badRequest(
      `metadata-location does not hold table metadata this catalog can commit to: no ${missing.join(', ')}`,
    );
  // Later commits write their metadata files under it.
  checkEntityLocation(string(value.location, 'location'), 'the location of the registered metadata');
  const metadata: Json = {
    properties: {},
    ...noHistory(),
    ...value,
  };
  return metadata as TableMetadata;
}

const fail = (message: string) => commitFailed(`Requirement failed: ${message}`);

const isRequirement = (value: unknown, type: string) =>
  typeof value === 'object' && value !== null && (value as Json).type === type;

/**
 * Whether a commit creates its table: Iceberg's create transaction (a `stage-create`, then this commit, with
 * `assert-create`). As in Iceberg's CatalogHandlers, a commit with `assert-create` takes no other requirement (a
 * 400): there is no table for one to be checked against. Requirements that are not an array are left to
 * {@link checkRequirements}.
 */
export function createsTable(requirements: unknown): boolean {
  if (!Array.isArray(requirements) || !requirements.some((r) => isRequirement(r, 'assert-create')))
    return false;
  if (!requirements.every((r) => isRequirement(r, 'assert-create')))
    throw badRequest('a commit with assert-create (one that creates its table) takes no other requirement');
  return true;
}

/** Check every requirement of a commit against the current metadata (undefined: the table does not exist). */
export function checkRequirements(metadata: TableMetadata | undefined, requirements: unknown): void {
  if (!Array.isArray(requirements)) throw badRequest('requirements must be an array');
  for (const [i, r] of requirements.entries()) {
    const requirement = object(r, `requirements[${i}]`);
    const type = string(requirement.type, `requirements[${i}].type`);
    if (type === 'assert-create') {
      if (metadata !== undefined) throw fail('table already exists');
      continue;
    }
    if (metadata === undefined) throw fail(`${type}: table does not exist`);
    switch (type) {
      case 'assert-table-uuid':
        if (requirement.uuid !== metadata['table-uuid']) throw fail('table UUID does not match');
        break;
      case 'assert-ref-snapshot-id': {
        const refName = string(requirement.ref, 'ref');
        const ref = Object.hasOwn(metadata.refs, refName) ? metadata.refs[refName] : undefined;
        const expected = requirement['snapshot-id'] ?? null;
        const actual = ref === undefined ? null : ref['snapshot-id'];
        if (!sameLong(expected, actual))
          throw fail(`branch or tag ${requirement.ref} is at ${actual}, not ${expected}`);
        break;
      }
      case 'assert-last-assigned-field-id':
        if (requirement['last-assigned-field-id'] !== metadata['last-column-id'])
          throw fail('last assigned field id changed');
        break;
      case 'assert-current-schema-id':
        if (requirement['current-schema-id'] !== metadata['current-schema-id'])
          throw fail('current schema changed');
        break;
      case 'assert-last-assigned-partition-id':
        if (requirement['last-assigned-partition-id'] !== metadata['last-partition-id']) {
          throw fail('last assigned partition id changed');
        }
        break;
      case 'assert-default-spec-id':
        if (requirement['default-spec-id'] !== metadata['default-spec-id'])
          throw fail('default partition spec changed');
        break;
      case 'assert-default-sort-order-id':
        if (requirement['default-sort-order-id'] !== metadata['default-sort-order-id'])
          throw fail('default sort order changed');
        break;
      default:
        throw badRequest(`unknown requirement type: ${type}`);
    }
  }
}

/**
 * Format-version bookkeeping the spec asks for beyond the common fields: v1 metadata also carries the current
 * `schema` and the default `partition-spec` fields (readers of v1 expect them); v3 carries `next-row-id`.
 */
export function withVersionFields(m: TableMetadata): TableMetadata {
  const out: TableMetadata = { ...m };
  if (m['format-version'] === 1) {
    out.schema = m.schemas.find((s) => s['schema-id'] === m['current-schema-id']);
    out['partition-spec'] =
      m['partition-specs'].find((s) => s['spec-id'] === m['default-spec-id'])?.fields ?? [];
  } else {
    delete out.schema;
    delete out['partition-spec'];
  }
  if (m['format-version'] >= 3 && !isLong(out['next-row-id'])) out['next-row-id'] = 0;
  return out;
}

/**
 * Row lineage (v3), as Iceberg's own catalog keeps it: a snapshot's rows are numbered from its `first-row-id`,
 * which must not be behind the table's `next-row-id`, and the table's counter moves on by its `added-rows`.
 * A snapshot without both fields leaves the counter where it is.
 */
function advanceRowIds(m: TableMetadata, snapshot: Json): void {
  if (snapshot['first-row-id'] === undefined || snapshot['added-rows'] === undefined) return;
  const first = long(snapshot['first-row-id'], 'snapshot.first-row-id');
  const added = long(snapshot['added-rows'], 'snapshot.added-rows');
  if (BigInt(added) < 0n) throw badRequest('snapshot.added-rows must not be negative');
  const next = isLong(m['next-row-id']) ? m['next-row-id'] : 0;
  if (BigInt(first) < BigInt(next))
    throw badRequest(`snapshot first-row-id ${first} is behind the table's next-row-id ${next}`);
  m['next-row-id'] = sum(next, added, 'next-row-id');
}

/** Iceberg's format version for a new table when nothing names one (TableMetadata.buildFromEmpty). */
const DEFAULT_FORMAT_VERSION = 2;

// The form of the UUIDs Iceberg's clients assign (java.util.UUID, Python's uuid), and the catalog does.
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * The metadata of a table that a commit creates (see {@link createsTable}): its updates applied in order to an
 * empty base, as Iceberg's CatalogHandlers does (`TableMetadata.buildFromEmpty`, in the format version of the
 * first `upgrade-format-version`, else 2). The base has no uuid (`assign-uuid` gives the staged one), no
 * location, schema, spec or sort order: the updates must make them all, or the commit is a 400 before anything
 * is written. Validated as any commit's updates are (and so as a create's request is: schemas, source ids, the
 * location's form and length, the caps of limits.ts); its location is confined to the warehouse where the file
 * is written. Java's ids: schema and spec ids from 0, partition field ids from 1000, sort order 0 for the
 * unsorted order and from 1 for others.
 */
export function createdTableMetadata(updates: unknown, nowMs: number): TableMetadata {
  if (!Array.isArray(updates)) throw badRequest('updates must be an array');
  const upgrade = updates.find(
    (u): u is Json => typeof u === 'object' && u !== null && (u as Json).action === 'upgrade-format-version',
  );
  const formatVersion =
    upgrade === undefined ? DEFAULT_FORMAT_VERSION : integer(upgrade['format-version'], 'format-version');
  if (![1, 2, 3].includes(formatVersion)) throw badRequest(`unsupported format-version ${formatVersion}`);
  const empty = {
    'format-version': formatVersion,
    'last-updated-ms': nowMs,
    'last-column-id': 0,
    schemas: [],
    'current-schema-id': -1,
    'partition-specs': [],
    'default-spec-id': -1,
    'last-partition-id': PARTITION_FIELD_BASE - 1,
    'sort-orders': [],
    'default-sort-order-id': -1,
    properties: {},
    ...noHistory(),
  } as unknown as TableMetadata;
  const m = applyUpdatesTo(empty, updates, nowMs);
  const missing: string[] = [];
  const uuid = m['table-uuid'] as unknown;
  if (uuid === undefined) missing.push('table-uuid (assign-uuid)');
  else if (typeof uuid !== 'string' || !UUID.test(uuid)) throw badRequest('assign-uuid must name a UUID');
  if (typeof m.location !== 'string') missing.push('location (set-location)');
  if (!m.schemas.some((s) => s['schema-id'] === m['current-schema-id']))
    missing.push('current schema (add-schema, set-current-schema)');
  if (!m['partition-specs'].some((s) => s['spec-id'] === m['default-spec-id']))
    missing.push('default partition spec (add-spec, set-default-spec)');
  if (!m['sort-orders'].some((s) => s['order-id'] === m['default-sort-order-id']))
    missing.push('default sort order (add-sort-order, set-default-sort-order)');
  if (missing.length > 0)
    throw badRequest(
      `the updates of a commit that creates its table (assert-create) must make the whole of its metadata; missing: ${missing.join(', ')}`,
    );
  // In the order a create writes its fields (the uuid and the location were set last).
  const { 'format-version': formatVersionOf, 'table-uuid': tableUuid, location, ...rest } = m;
  return { 'format-version': formatVersionOf, 'table-uuid': tableUuid, location, ...rest } as TableMetadata;
}

/** A sort order with no fields: the table's rows in no order. */
const isUnsorted = (order: { readonly fields?: unknown }): boolean =>
  !Array.isArray(order.fields) || order.fields.length === 0;

/** Refuse to add a schema, spec or sort order past its cap (catalog/limits.ts). */
function checkRoom(list: readonly unknown[], max: number, what: string): void {
  if (list.length >= max) throw badRequest(`a table holds at most ${max} ${what}`);
}

/** Apply a commit's updates in order and return the new metadata; the input is not modified ({@link applyUpdatesTo}). */
export function applyUpdates(current: TableMetadata, updates: unknown, nowMs: number): TableMetadata {
  return applyUpdatesTo(structuredClone(current), updates, nowMs);
}

/**
 * Apply a commit's updates in order to `m` itself and return it: for metadata its caller owns and has no further
 * use for as it was (a commit's, parsed from its row for this request alone), which then is not copied first
 * (metadata can be megabytes). After a refusal (a 400), `m` may be half updated. Linear in the metadata and the
 * updates: ids are tracked as the updates go (the next schema id, the set of snapshot ids), never recomputed from
 * the whole table per update.
 */
export function applyUpdatesTo(m: TableMetadata, updates: unknown, nowMs: number): TableMetadata {
  if (!Array.isArray(updates)) throw badRequest('updates must be an array');
  let lastAddedSchemaId: number | undefined;
  let lastAddedSpecId: number | undefined;
  let lastAddedOrderId: number | undefined;
  const schemas = idsOf(m.schemas, 'schema-id', -1);
  const specs = idsOf(m['partition-specs'], 'spec-id', -1);
  const orders = idsOf(m['sort-orders'], 'order-id', 0);
  // The fields of the current schema, that added specs and sort orders bind to: found on first use, again after
  // the current schema changes.
  let columns: ReadonlySet<number> | undefined;
  const currentColumns = () => {
    if (columns !== undefined) return columns;
    const current = m.schemas.find((s) => s['schema-id'] === m['current-schema-id']);
    if (current === undefined)
      throw badRequest(`the table has no current schema (${m['current-schema-id']}) to bind to`);
    columns = sourceIdsOf(current);
    return columns;
  };
  // Keyed by bigint: membership by exact value, whichever representation a stored id has. Built on first use.
  let snapshotIds: Set<bigint> | undefined;
  const snapshotIdSet = () => {
    snapshotIds ??= new Set(
      m.snapshots.flatMap((s) => (isLong(s['snapshot-id']) ? [BigInt(s['snapshot-id'])] : [])),
    );
    return snapshotIds;
  };
  for (const [i, u] of updates.entries()) {
    const update = object(u, `updates[${i}]`);
    const action = string(update.action, `updates[${i}].action`);
    switch (action) {
      case 'assign-uuid': {
        // As Iceberg's TableMetadata.Builder: a table's uuid is never reassigned ("Cannot reassign uuid"); its
        // own uuid again changes nothing. (A replay finds a created table by its uuid: a second table with it
        // would be answered in its place.)
        const uuid = string(update.uuid, 'uuid');
        if (m['table-uuid'] !== undefined && m['table-uuid'] !== uuid)
          throw badRequest('Cannot reassign uuid: assign-uuid must name the uuid the table has');
        m['table-uuid'] = uuid;
        break;
      }
      case 'upgrade-format-version': {
        const version = integer(update['format-version'], 'format-version');
        if (version < m['format-version'] || version > 3)
          throw badRequest(`cannot move format-version to ${version}`);
        m['format-version'] = version;
        break;
      }
      case 'add-schema': {
        const schema = checkSchema(update.schema, 'schema');
        checkRoom(m.schemas, MAX_SCHEMAS, 'schemas');
        const id = nextId(schemas.max, 'schema id');
        schemas.max = id;
        schemas.ids.add(id);
        m.schemas.push({ ...schema, 'schema-id': id });
        m['last-column-id'] = Math.max(
          m['last-column-id'],
          maxFieldId(schema),
          Number(update['last-column-id'] ?? 0),
        );
        lastAddedSchemaId = id;
        break;
      }
      case 'set-current-schema': {
        let id = integer(update['schema-id'], 'schema-id');
        if (id === -1) {
          if (lastAddedSchemaId === undefined) throw badRequest('set-current-schema -1 without add-schema');
          id = lastAddedSchemaId;
        }
        if (!schemas.ids.has(id)) throw badRequest(`no schema with id ${id}`);
        if (id !== m['current-schema-id']) columns = undefined;
        m['current-schema-id'] = id;
        break;
      }
      case 'add-spec': {
        const { spec, last } = withPartitionFieldIds(
          object(update.spec, 'spec'),
          m['last-partition-id'],
          currentColumns(),
          'spec',
        );
        checkRoom(m['partition-specs'], MAX_PARTITION_SPECS, 'partition specs');
        const id = nextId(specs.max, 'partition spec id');
        specs.max = id;
        specs.ids.add(id);
        m['partition-specs'].push({ ...spec, 'spec-id': id });
        m['last-partition-id'] = last;
        lastAddedSpecId = id;
        break;
      }
      case 'set-default-spec': {
        let id = integer(update['spec-id'], 'spec-id');
        if (id === -1) {
          if (lastAddedSpecId === undefined) throw badRequest('set-default-spec -1 without add-spec');
          id = lastAddedSpecId;
        }
        if (!specs.ids.has(id)) throw badRequest(`no partition spec with id ${id}`);
        m['default-spec-id'] = id;
        break;
      }
      case 'add-sort-order': {
        const order = checkSortOrder(
          object(update['sort-order'], 'sort-order'),
          currentColumns(),
          'sort-order',
        );
        // As Iceberg's builder assigns them: the unsorted order is id 0 (added once; Iceberg's readers refuse an
        // unsorted order of another id), a sorted one the next id after the highest (at least 1). A table whose
        // order 0 is sorted (an older server's, or a registered file's) gets its unsorted order after the highest.
        const unsorted = isUnsorted(order);
        const zero = m['sort-orders'].find((existing) => existing['order-id'] === 0);
        if (unsorted && zero !== undefined && isUnsorted(zero)) {
          lastAddedOrderId = 0;
          break;
        }
        checkRoom(m['sort-orders'], MAX_SORT_ORDERS, 'sort orders');
        const id = unsorted && zero === undefined ? 0 : nextId(orders.max, 'sort order id');
        orders.max = Math.max(orders.max, id);
        orders.ids.add(id);
        m['sort-orders'].push({ ...order, 'order-id': id });
        lastAddedOrderId = id;
        break;
      }
      case 'set-default-sort-order': {
        let id = integer(update['sort-order-id'], 'sort-order-id');
        if (id === -1) {
          if (lastAddedOrderId === undefined)
            throw badRequest('set-default-sort-order -1 without add-sort-order');
          id = lastAddedOrderId;
        }
        if (!orders.ids.has(id)) throw badRequest(`no sort order with id ${id}`);
        m['default-sort-order-id'] = id;
        break;
      }
      case 'add-snapshot': {
        const snapshot = object(update.snapshot, 'snapshot');
        const id = long(snapshot['snapshot-id'], 'snapshot.snapshot-id');
        if (snapshotIdSet().has(BigInt(id))) throw badRequest(`snapshot ${id} already exists`);
        const sequence =
          snapshot['sequence-number'] === undefined
            ? sum(m['last-sequence-number'], 1, 'last-sequence-number')
            : long(snapshot['sequence-number'], 'snapshot.sequence-number');
        if (m['format-version'] >= 3) advanceRowIds(m, snapshot);
        m.snapshots.push(snapshot);
        snapshotIdSet().add(BigInt(id));
        m['last-sequence-number'] = maxLong(m['last-sequence-number'], sequence);
        break;
      }
      case 'set-snapshot-ref': {
        const name = string(update['ref-name'], 'ref-name');
        const id = long(update['snapshot-id'], 'snapshot-id');
        const type = string(update.type, 'type');
        if (!snapshotIdSet().has(BigInt(id))) throw badRequest(`no snapshot with id ${id}`);
        const { action: _action, 'ref-name': _name, ...ref } = update;
        // Defined, not assigned: a ref named `__proto__` is a name like any other.
        Object.defineProperty(m.refs, name, {
          value: { ...ref, type, 'snapshot-id': id },
          enumerable: true,
          writable: true,
          configurable: true,
        });
        if (name === 'main') {
          m['current-snapshot-id'] = id;
          m['snapshot-log'].push({ 'snapshot-id': id, 'timestamp-ms': nowMs });
        }
        break;
      }
      case 'remove-snapshots': {
        const listed = (update['snapshot-ids'] as unknown[] | undefined) ?? [];
        // Keyed by bigint: membership by exact value, whichever representation a stored id has.
        const ids = new Set(listed.map((id, j) => BigInt(long(id, `snapshot-ids[${j}]`))));
        const removed = (id: unknown) => isLong(id) && ids.has(BigInt(id));
        m.snapshots = m.snapshots.filter((s) => !removed(s['snapshot-id']));
        for (const id of ids) snapshotIds?.delete(id);
        for (const [name, ref] of Object.entries(m.refs))
          if (removed(ref['snapshot-id'])) delete m.refs[name];
        if (removed(m['current-snapshot-id'])) delete m['current-snapshot-id'];
        // As Iceberg's own catalog does: statistics of a removed snapshot go with it.
        for (const key of ['statistics', 'partition-statistics'])
          if (Array.isArray(m[key]))
            m[key] = (m[key] as Json[]).filter((file) => !removed(file?.['snapshot-id']));
        break;
      }
      case 'remove-snapshot-ref': {
        const name = string(update['ref-name'], 'ref-name');
        delete m.refs[name];
        if (name === 'main') delete m['current-snapshot-id'];
        break;
      }
      case 'set-location':
        m.location = checkEntityLocation(string(update.location, 'location'), 'location');
        break;
      case 'set-properties':
        Object.assign(m.properties, stringMap(update.updates, 'updates'));
        break;
      case 'remove-properties':
        for (const key of (update.removals as unknown[] | undefined) ?? [])
          delete m.properties[string(key, 'removals[]')];
        break;
      default:
        throw badRequest(`unknown or unsupported update action: ${action}`);
    }
  }
  m['last-updated-ms'] = nowMs;
  return withVersionFields(m);
}
