import { readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { MAX_SCHEMAS, MAX_TABLE_CHANGES, MAX_UPDATES_PER_COMMIT } from '../src/catalog/limits.js';
import { applyUpdates, type TableMetadata } from '../src/catalog/table-metadata.js';
import { applyViewUpdates, type ViewMetadata } from '../src/catalog/view-metadata.js';
import {
  call,
  idempotencyRecords,
  type Node,
  newKey,
  schema,
  startNodeWithTable,
  tableMetadata,
} from './support/server.js';

// What one commit may do: a bounded number of updates, each applied in constant time (ids tracked as they go,
// never `Math.max(...all)` per update, which was quadratic and overflowed the stack past ~120k schemas), onto
// tables that hold a bounded number of schemas, specs and sort orders.

let node: Node;
beforeAll(async () => {
  node = await startNodeWithTable();
});
afterAll(async () => node.close());

const addSchema = { action: 'add-schema', schema: { type: 'struct', fields: [] } };

/** Table metadata as a file in the warehouse, holding `count` schemas. */
function metadataFile(name: string, count: number): string {
  const metadata = tableMetadata(pathToFileURL(join(node.warehouse, 'n', name)).href, {
    schemas: Array.from({ length: count }, (_, i) => ({ ...schema, 'schema-id': i })),
  });
  const file = join(node.warehouse, `${name}.metadata.json`);
  writeFileSync(file, JSON.stringify(metadata));
  return file;
}

describe('updates per commit', () => {
  test(`more than ${MAX_UPDATES_PER_COMMIT} updates: 400 before the key is taken`, async () => {
    const key = newKey();
    const body = {
      requirements: [],
      updates: Array.from({ length: MAX_UPDATES_PER_COMMIT + 1 }, () => addSchema),
    };
    const answer = await call(node.url, 'POST', '/v1/namespaces/n/tables/t', { key, body });
    expect(answer.status, answer.text).toBe(400);
    expect(answer.json().error.message).toMatch(`at most ${MAX_UPDATES_PER_COMMIT} updates`);
    expect(await idempotencyRecords(node, key)).toBe(0);
    const loaded = (await call(node.url, 'GET', '/v1/namespaces/n/tables/t')).json();
    expect(loaded.metadata.schemas).toHaveLength(1);
  });

  test(`${MAX_UPDATES_PER_COMMIT} add-schema updates apply, numbered on from the highest id`, async () => {
    const body = {
      requirements: [],
      updates: [
        ...Array.from({ length: MAX_UPDATES_PER_COMMIT - 1 }, () => addSchema),
        { action: 'set-current-schema', 'schema-id': -1 },
      ],
    };
    const answer = await call(node.url, 'POST', '/v1/namespaces/n/tables/t', { key: newKey(), body });
    expect(answer.status, answer.text.slice(0, 300)).toBe(200);
    const { metadata } = answer.json();
    expect(metadata.schemas).toHaveLength(MAX_UPDATES_PER_COMMIT);
    expect(metadata['current-schema-id']).toBe(MAX_UPDATES_PER_COMMIT - 1);
  });

  test('a view commit is capped alike', async () => {
    const answer = await call(node.url, 'POST', '/v1/namespaces/n/views/missing', {
      key: newKey(),
      body: { updates: Array.from({ length: MAX_UPDATES_PER_COMMIT + 1 }, () => addSchema) },
    });
    expect(answer.status, answer.text).toBe(400);
  });
});

describe('what a table holds', () => {
  test(`a table at ${MAX_SCHEMAS} schemas refuses another (400), and still takes other commits`, async () => {
    const registered = await call(node.url, 'POST', '/v1/namespaces/n/register', {
      body: { name: 'full', 'metadata-location': metadataFile('full', MAX_SCHEMAS) },
    });
    expect(registered.status, registered.text.slice(0, 300)).toBe(200);
    const more = await call(node.url, 'POST', '/v1/namespaces/n/tables/full', {
      key: newKey(),
      body: { requirements: [], updates: [addSchema] },
    });
    expect(more.status, more.text.slice(0, 300)).toBe(400);
    expect(more.json().error.message).toMatch(`at most ${MAX_SCHEMAS} schemas`);
    const other = await call(node.url, 'POST', '/v1/namespaces/n/tables/full', {
      body: { requirements: [], updates: [{ action: 'set-properties', updates: { a: 'b' } }] },
    });
    expect(other.status, other.text.slice(0, 300)).toBe(200);
  });
});

describe('ids assigned in one pass', () => {
  const table = (schemaIds: number[]) =>
    ({
      'format-version': 2,
      'table-uuid': 'u',
      location: '/w/t',
      'last-updated-ms': 1,
      'last-column-id': 0,
      schemas: schemaIds.map((id) => ({ type: 'struct', fields: [], 'schema-id': id })),
      'current-schema-id': schemaIds[0],
      'partition-specs': [{ 'spec-id': 4, fields: [] }],
      'default-spec-id': 4,
      'last-partition-id': 999,
      'sort-orders': [{ 'order-id': 0, fields: [] }],
      'default-sort-order-id': 0,
      properties: {},
      snapshots: [],
      refs: {},
      'snapshot-log': [],
      'metadata-log': [],
      'last-sequence-number': 0,
    }) as TableMetadata;

  test('a new schema or spec takes the highest id + 1, whatever the order of the list; an unsorted order is 0', () => {
    const next = applyUpdates(
      table([3, 9, 1]),
      [
        addSchema,
        addSchema,
        { action: 'set-current-schema', 'schema-id': -1 },
        { action: 'add-spec', spec: { fields: [] } },
        { action: 'set-default-spec', 'spec-id': -1 },
        { action: 'add-sort-order', 'sort-order': { fields: [] } },
        { action: 'set-default-sort-order', 'sort-order-id': -1 },
      ],
      2,
    );
    expect(next.schemas.map((s) => s['schema-id'])).toEqual([3, 9, 1, 10, 11]);
    expect(next['current-schema-id']).toBe(11);
    expect(next['default-spec-id']).toBe(5);
    // Iceberg's id for the unsorted order, which the table has: reused (sort-order-ids.test.ts).
    expect(next['default-sort-order-id']).toBe(0);
    expect(next['sort-orders']).toHaveLength(1);
  });

  test('add-schema on a table of 150k schemas (more than a spread of arguments holds): 400, not a RangeError', () => {
    const ids = Array.from({ length: 150_000 }, (_, i) => i);
    expect(() => applyUpdates(table(ids), [addSchema], 2)).toThrow(`at most ${MAX_SCHEMAS} schemas`);
  });

  test('view versions are numbered on from the highest id', () => {
    const version = (id: number) => ({
      'version-id': id,
      'timestamp-ms': 1,
      'schema-id': 0,
      summary: {},
      representations: [],
      'default-namespace': ['n'],
    });
    const view = {
      'view-uuid': 'u',
      'format-version': 1,
      location: '/w/v',
      'current-version-id': 7,
      versions: [version(7), version(2)],
      'version-log': [],
      schemas: [{ type: 'struct', fields: [], 'schema-id': 0 }],
      properties: {},
    } as ViewMetadata;
    const next = applyViewUpdates(
      view,
      [
        { action: 'add-view-version', 'view-version': version(1) },
        { action: 'set-current-view-version', 'view-version-id': -1 },
      ],
      2,
    );
    expect(next['current-version-id']).toBe(8);
  });
});

describe('transactions/commit', () => {
  const change = (name: string, requirements: unknown[] = []) => ({
    identifier: { namespace: ['n'], name },
    requirements,
    updates: [{ action: 'set-properties', updates: { by: 'transaction' } }],
  });
  const metadataFiles = () =>
    readdirSync(node.warehouse, { recursive: true, encoding: 'utf8' }).filter((f) =>
      f.endsWith('.metadata.json'),
    );

  test('a table named twice: 400 before the key is taken, nothing written', async () => {
    const before = metadataFiles();
    const key = newKey();
    const answer = await call(node.url, 'POST', '/v1/transactions/commit', {
      key,
      body: { 'table-changes': [change('t'), change('a'), change('t')] },
    });
    expect(answer.status, answer.text).toBe(400);
    expect(answer.json().error.message).toMatch('names n.t again');
    expect(await idempotencyRecords(node, key)).toBe(0);
    expect(metadataFiles()).toEqual(before);
  });

  test.each([
    ['different tables', (i: number) => `t${i}`, MAX_TABLE_CHANGES + 1],
    ['one table, thousands of times (one small request once wrote a file per naming)', () => 't', 5000],
  ])(
    `more than ${MAX_TABLE_CHANGES} table changes, %s: 400 before the key is taken`,
    async (_label, name, count) => {
      const before = metadataFiles();
      const key = newKey();
      const answer = await call(node.url, 'POST', '/v1/transactions/commit', {
        key,
        body: { 'table-changes': Array.from({ length: count }, (_, i) => change(name(i))) },
      });
      expect(answer.status, answer.text).toBe(400);
      expect(answer.json().error.message).toMatch(`at most ${MAX_TABLE_CHANGES} changes`);
      expect(await idempotencyRecords(node, key)).toBe(0);
      expect(metadataFiles()).toEqual(before);
    },
  );

  test('every change is checked before any file is written: a failed requirement on the last leaves none', async () => {
    await call(node.url, 'POST', '/v1/namespaces/n/tables', { body: { name: 'a', schema } });
    await call(node.url, 'POST', '/v1/namespaces/n/tables', { body: { name: 'z', schema } });
    const before = metadataFiles();
    const answer = await call(node.url, 'POST', '/v1/transactions/commit', {
      key: newKey(),
      body: {
        'table-changes': [change('a'), change('z', [{ type: 'assert-table-uuid', uuid: 'another' }])],
      },
    });
    expect(answer.status, answer.text).toBe(409);
    expect(metadataFiles()).toEqual(before);
    const a = (await call(node.url, 'GET', '/v1/namespaces/n/tables/a')).json();
    expect(a.metadata.properties).toEqual({});
  });

  test('two tables commit together, whatever the order they are sent in', async () => {
    const answer = await call(node.url, 'POST', '/v1/transactions/commit', {
      key: newKey(),
      body: { 'table-changes': [change('z'), change('a')] },
    });
    expect(answer.status, answer.text).toBe(204);
    for (const name of ['a', 'z']) {
      const loaded = (await call(node.url, 'GET', `/v1/namespaces/n/tables/${name}`)).json();
      expect(loaded.metadata.properties).toEqual({ by: 'transaction' });
    }
  });
});
