import { randomUUID } from 'node:crypto';
import { badRequest, commitFailed } from './iceberg-error.js';
import { idsOf } from './id-set.js';
import { MAX_SCHEMAS, MAX_VIEW_VERSIONS } from './limits.js';
import { checkEntityLocation, checkFieldIds, nextId } from './table-metadata.js';

type Json = Record<string, unknown>;
export type ViewMetadata = Json & {
  'view-uuid': string;
  'format-version': number;
  location: string;
  'current-version-id': number;
  versions: Json[];
  'version-log': Json[];
  schemas: Json[];
  properties: Record<string, string>;
};

function object(value: unknown, field: string): Json {
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw badRequest(`${field} must be an object`);
  return value as Json;
}

function checkVersion(value: unknown, field: string): Json {
  const version = object(value, field);
  if (!Number.isSafeInteger(version['version-id']))
    throw badRequest(`${field}.version-id must be an integer`);
  if (!Array.isArray(version.representations)) throw badRequest(`${field}.representations must be an array`);
  if (!Array.isArray(version['default-namespace']))
    throw badRequest(`${field}.default-namespace must be an array`);
  return version;
}

function checkSchema(value: unknown, field: string): Json {
  const schema = object(value, field);
  if (schema.type !== 'struct' || !Array.isArray(schema.fields))
    throw badRequest(`${field} must be a struct schema with fields`);
  checkFieldIds(schema, field);
  return schema;
}

function stringMap(value: unknown, field: string): Record<string, string> {
  if (value === undefined) return {};
  const map = object(value, field);
  for (const [k, v] of Object.entries(map))
    if (typeof v !== 'string') throw badRequest(`${field}.${k} must be a string`);
  return map as Record<string, string>;
}

/** The metadata of a new view from a CreateViewRequest. */
export function newViewMetadata(request: Json, location: string, nowMs: number): ViewMetadata {
  checkEntityLocation(location, 'location');
  const schema = { ...checkSchema(request.schema, 'schema'), 'schema-id': 0 };
  const version: Json = { ...checkVersion(request['view-version'], 'view-version'), 'schema-id': 0 };
  if (request.properties === undefined) throw badRequest('properties is required');
  return {
    'view-uuid': randomUUID(),
    'format-version': 1,
    location,
    'current-version-id': Number(version['version-id']),
    versions: [version],
    'version-log': [{ 'version-id': version['version-id'], 'timestamp-ms': nowMs }],
    schemas: [schema],
    properties: stringMap(request.properties, 'properties'),
  };
}

/** View metadata read from a file a client registers (already valid against the spec's ViewMetadata). */
export function registeredViewMetadata(document: unknown): ViewMetadata {
  const metadata: Json = { properties: {}, ...object(document, 'metadata') };
  // Later commits write their metadata files under it.
  if (typeof metadata.location !== 'string') throw badRequest('location must be a string');
  checkEntityLocation(metadata.location, 'the location of the registered metadata');
  return metadata as ViewMetadata;
}

export function checkViewRequirements(metadata: ViewMetadata, requirements: unknown): void {
  if (requirements === undefined) return;
  if (!Array.isArray(requirements)) throw badRequest('requirements must be an array');
  for (const [i, r] of requirements.entries()) {
    const requirement = object(r, `requirements[${i}]`);
    if (requirement.type !== 'assert-view-uuid')
      throw badRequest(`unknown requirement type: ${String(requirement.type)}`);
    if (requirement.uuid !== metadata['view-uuid'])
      throw commitFailed('Requirement failed: view UUID does not match');
  }
}

/**
 * Apply a view commit's updates in order (ViewUpdate of the spec) and return the new metadata. Linear: ids are
 * tracked as the updates go, never recomputed from the whole view per update.
 */
export function applyViewUpdates(current: ViewMetadata, updates: unknown, nowMs: number): ViewMetadata {
  if (!Array.isArray(updates)) throw badRequest('updates must be an array');
  const m: ViewMetadata = structuredClone(current);
  let lastSchemaId: number | undefined;
  let lastVersionId: number | undefined;
  const schemas = idsOf(m.schemas, 'schema-id', -1);
  const versions = idsOf(m.versions, 'version-id', 0);
  for (const [i, u] of updates.entries()) {
    const update = object(u, `updates[${i}]`);
    switch (update.action) {
      case 'assign-uuid':
        // As Iceberg's ViewMetadata.Builder: a view's uuid is never reassigned ("Cannot reassign uuid"); its own
        // uuid again changes nothing.
        if (typeof update.uuid !== 'string') throw badRequest('uuid must be a string');
        if (m['view-uuid'] !== undefined && m['view-uuid'] !== update.uuid)
          throw badRequest('Cannot reassign uuid: assign-uuid must name the uuid the view has');
        m['view-uuid'] = update.uuid;
        break;
      case 'upgrade-format-version':
        if (update['format-version'] !== 1) throw badRequest('views have format-version 1');
        break;
      case 'add-schema': {
        const schema = checkSchema(update.schema, 'schema');
        if (m.schemas.length >= MAX_SCHEMAS) throw badRequest(`a view holds at most ${MAX_SCHEMAS} schemas`);
        const id = nextId(schemas.max, 'schema id');
        schemas.max = id;
        schemas.ids.add(id);
        m.schemas.push({ ...schema, 'schema-id': id });
        lastSchemaId = id;
        break;
      }
      case 'set-location':
        if (typeof update.location !== 'string') throw badRequest('location must be a string');
        m.location = checkEntityLocation(update.location, 'location');
        break;
      case 'set-properties':
        Object.assign(m.properties, stringMap(update.updates, 'updates'));
        break;
      case 'remove-properties':
        for (const key of (update.removals as unknown[] | undefined) ?? []) delete m.properties[String(key)];
        break;
      case 'add-view-version': {
        const version = checkVersion(update['view-version'], 'view-version');
        const schemaId = version['schema-id'] === -1 ? lastSchemaId : Number(version['schema-id']);
        if (schemaId === undefined || !schemas.ids.has(schemaId)) {
          throw badRequest(`view-version refers to unknown schema ${String(version['schema-id'])}`);
        }
        if (m.versions.length >= MAX_VIEW_VERSIONS)
          throw badRequest(`a view holds at most ${MAX_VIEW_VERSIONS} versions`);
        const id = nextId(versions.max, 'view version id');
        versions.max = id;
        versions.ids.add(id);
        m.versions.push({ ...version, 'version-id': id, 'schema-id': schemaId });
        lastVersionId = id;
        break;
      }
      case 'set-current-view-version': {
        let id = Number(update['view-version-id']);
        if (id === -1) id = lastVersionId ?? Number.NaN;
        if (!versions.ids.has(id)) throw badRequest(`no view version ${update['view-version-id']}`);
        m['current-version-id'] = id;
        m['version-log'].push({ 'version-id': id, 'timestamp-ms': nowMs });
        break;
      }
      default:
        throw badRequest(`unknown or unsupported view update action: ${String(update.action)}`);
    }
  }
  return m;
}
