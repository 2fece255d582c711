import { IcebergRestCatalog } from 'iceberg-js';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { checkResponse } from './support/openapi.js';
import { call, type Node, newKey, startNode } from './support/server.js';

let node: Node;
const problems: string[] = [];
const seen: { method: string; path: string; status: number }[] = [];

/** fetch that validates every answer against the OpenAPI spec. */
const validatingFetch: typeof fetch = async (input, init) => {
  const response = await fetch(input, init);
  const url = new URL(typeof input === 'string' ? input : input instanceof URL ? input.href : input.url);
  const method = init?.method ?? 'GET';
  const text = await response.clone().text();
  seen.push({ method, path: url.pathname, status: response.status });
  problems.push(...checkResponse(method, url.pathname, response.status, text));
  return response;
};

/**
 * fetch that sends every mutation twice with the client's key, as a client retrying after a lost answer
 * does: the first answer is dropped, and the caller gets the retry's.
 */
const retryingFetch: typeof fetch = async (input, init) => {
  const method = init?.method ?? 'GET';
  if (method === 'POST' || method === 'DELETE') {
    const headers = new Headers(init?.headers);
    if (!headers.has('idempotency-key')) headers.set('idempotency-key', newKey());
    const first = await validatingFetch(input, { ...init, headers });
    await first.arrayBuffer(); // "lost": the client never sees it
    return validatingFetch(input, { ...init, headers });
  }
  return validatingFetch(input, init);
};

beforeAll(async () => {
  node = await startNode('sqlite::memory:');
});
afterAll(async () => node.close());

const schema = {
  type: 'struct' as const,
  'schema-id': 0,
  fields: [
    { id: 1, name: 'id', required: true, type: 'long' as const },
    { id: 2, name: 'name', required: false, type: 'string' as const },
  ],
};

describe('iceberg-js against the catalog, every answer validated against the OpenAPI spec', () => {
  test('create namespace, create table, load, commit a schema change and a snapshot, rename, drop', async () => {
    const catalog = new IcebergRestCatalog({ baseUrl: `${node.url}`, fetch: validatingFetch });
    await catalog.createNamespace({ namespace: ['e2e'] }, { properties: { owner: 'test' } });
    expect(await catalog.namespaceExists({ namespace: ['e2e'] })).toBe(true);
    const created = await catalog.createTable({ namespace: ['e2e'] }, { name: 'events', schema });
    expect(created['format-version']).toBe(2);
    const loaded = await catalog.loadTable({ namespace: ['e2e'], name: 'events' });
    expect(loaded['table-uuid']).toBe(created['table-uuid']);
    const committed = await catalog.commitTable({ namespace: ['e2e'], name: 'events' }, {
      requirements: [{ type: 'assert-table-uuid', uuid: created['table-uuid'] }],
      updates: [
        {
          action: 'add-schema',
          schema: {
            type: 'struct',
            fields: [...schema.fields, { id: 3, name: 'at', required: false, type: 'timestamptz' }],
          },
        },
        { action: 'set-current-schema', 'schema-id': -1 },
        {
          action: 'add-snapshot',
          snapshot: {
            'snapshot-id': 11,
            'timestamp-ms': Date.now(),
            'manifest-list': 'file:///tmp/m.avro',
            summary: { operation: 'append' },
          },
        },
        { action: 'set-snapshot-ref', 'ref-name': 'main', type: 'branch', 'snapshot-id': 11 },
      ],
    } as never);
    expect(committed.metadata['current-schema-id']).toBe(1);
    await catalog.renameTable({
      source: { namespace: ['e2e'], name: 'events' },
      destination: { namespace: ['e2e'], name: 'events_v2' },
    });
    expect(await catalog.tableExists({ namespace: ['e2e'], name: 'events_v2' })).toBe(true);
    await catalog.dropTable({ namespace: ['e2e'], name: 'events_v2' });
    await catalog.dropNamespace({ namespace: ['e2e'] });
    expect(problems).toEqual([]);
  });

  test('every mutation retried with its key after a lost answer: applied once, the retry replays', async () => {
    const catalog = new IcebergRestCatalog({ baseUrl: `${node.url}`, fetch: retryingFetch });
    await catalog.createNamespace({ namespace: ['replay'] });
    const created = await catalog.createTable({ namespace: ['replay'] }, { name: 't', schema });
    await catalog.commitTable({ namespace: ['replay'], name: 't' }, {
      requirements: [],
      updates: [{ action: 'set-properties', updates: { a: '1' } }],
    } as never);
    const table = await catalog.loadTable({ namespace: ['replay'], name: 't' });
    expect(table['table-uuid']).toBe(created['table-uuid']);
    expect(table['metadata-log']).toHaveLength(1); // one commit, not two
    await catalog.dropTable({ namespace: ['replay'], name: 't' });
    await catalog.dropNamespace({ namespace: ['replay'] });
    expect(problems).toEqual([]);
  });

  test('the statuses the catalog sent are all declared by the spec for their operation', () => {
    expect(seen.length).toBeGreaterThan(10);
    expect(problems).toEqual([]);
  });
});

describe('views, multi-table transactions and unregister', () => {
  const view = {
    name: 'daily',
    schema: { type: 'struct', 'schema-id': 0, fields: [{ id: 1, name: 'n', required: false, type: 'long' }] },
    'view-version': {
      'version-id': 1,
      'timestamp-ms': 1,
      'schema-id': 0,
      summary: { engine: 'test' },
      representations: [{ type: 'sql', sql: 'SELECT 1 AS n', dialect: 'spark' }],
      'default-namespace': ['v'],
    },
    properties: {},
  };

  async function checked(method: string, path: string, options: Parameters<typeof call>[3] = {}) {
    const answer = await call(node.url, method, path, options);
    problems.push(...checkResponse(method, path, answer.status, answer.text));
    return answer;
  }

  test('views: create, list, load, HEAD, replace, rename, drop; a view and a table cannot share a name', async () => {
    await checked('POST', '/v1/namespaces', { body: { namespace: ['v'] } });
    const created = await checked('POST', '/v1/namespaces/v/views', { body: view, key: newKey() });
    expect(created.status).toBe(200);
    expect((await checked('GET', '/v1/namespaces/v/views')).json().identifiers).toEqual([
      { namespace: ['v'], name: 'daily' },
    ]);
    expect((await checked('HEAD', '/v1/namespaces/v/views/daily')).status).toBe(204);
    const replaced = await checked('POST', '/v1/namespaces/v/views/daily', {
      body: {
        requirements: [{ type: 'assert-view-uuid', uuid: created.json().metadata['view-uuid'] }],
        updates: [
          {
            action: 'add-view-version',
            'view-version': { ...view['view-version'], 'version-id': 2, 'schema-id': -1 },
          },
          { action: 'set-current-view-version', 'view-version-id': -1 },
        ],
      },
    });
    expect(replaced.status, replaced.text).toBe(400); // schema -1 without add-schema in the same commit
    const ok = await checked('POST', '/v1/namespaces/v/views/daily', {
      body: {
        updates: [
          { action: 'add-schema', schema: view.schema },
          { action: 'add-view-version', 'view-version': { ...view['view-version'], 'schema-id': -1 } },
          { action: 'set-current-view-version', 'view-version-id': -1 },
        ],
      },
    });
    expect(ok.json().metadata['current-version-id']).toBe(2);
    const clash = await checked('POST', '/v1/namespaces/v/tables', {
      body: { name: 'daily', schema: view.schema },
    });
    expect(clash.status).toBe(409);
    expect(
      (
        await checked('POST', '/v1/views/rename', {
          body: {
            source: { namespace: ['v'], name: 'daily' },
            destination: { namespace: ['v'], name: 'weekly' },
          },
        })
      ).status,
    ).toBe(204);
    expect((await checked('DELETE', '/v1/namespaces/v/views/weekly', { key: newKey() })).status).toBe(204);
    expect((await checked('GET', '/v1/namespaces/v/views/weekly')).status).toBe(404);
    expect(problems).toEqual([]);
  });

  test('transactions/commit applies every table change or none', async () => {
    await checked('POST', '/v1/namespaces', { body: { namespace: ['tx'] } });
    const schema = view.schema;
    const a = (await checked('POST', '/v1/namespaces/tx/tables', { body: { name: 'a', schema } })).json()
      .metadata;
    await checked('POST', '/v1/namespaces/tx/tables', { body: { name: 'b', schema } });
    const set = (value: string) => [{ action: 'set-properties', updates: { v: value } }];
    const failed = await checked('POST', '/v1/transactions/commit', {
      body: {
        'table-changes': [
          { identifier: { namespace: ['tx'], name: 'a' }, requirements: [], updates: set('1') },
          {
            identifier: { namespace: ['tx'], name: 'b' },
            requirements: [{ type: 'assert-table-uuid', uuid: 'wrong' }],
            updates: set('1'),
          },
        ],
      },
    });
    expect(failed.status).toBe(409);
    expect((await checked('GET', '/v1/namespaces/tx/tables/a')).json().metadata.properties).toEqual({});
    const key = newKey();
    const body = {
      'table-changes': [
        {
          identifier: { namespace: ['tx'], name: 'a' },
          requirements: [{ type: 'assert-table-uuid', uuid: a['table-uuid'] }],
          updates: set('2'),
        },
        { identifier: { namespace: ['tx'], name: 'b' }, requirements: [], updates: set('2') },
      ],
    };
    expect((await checked('POST', '/v1/transactions/commit', { body, key })).status).toBe(204);
    const retry = await checked('POST', '/v1/transactions/commit', { body, key });
    expect(retry.status).toBe(204);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    for (const name of ['a', 'b']) {
      const metadata = (await checked('GET', `/v1/namespaces/tx/tables/${name}`)).json().metadata;
      expect(metadata.properties).toEqual({ v: '2' });
      expect(metadata['metadata-log']).toHaveLength(1);
    }
    expect(problems).toEqual([]);
  });

  test('unregister returns the last metadata and forgets the table, files kept', async () => {
    await checked('POST', '/v1/namespaces', { body: { namespace: ['un'] } });
    const created = (
      await checked('POST', '/v1/namespaces/un/tables', { body: { name: 't', schema: view.schema } })
    ).json();
    const gone = await checked('POST', '/v1/namespaces/un/tables/t/unregister', { key: newKey() });
    expect(gone.status).toBe(200);
    expect(gone.json()['metadata-location']).toBe(created['metadata-location']);
    const again = await checked('POST', '/v1/namespaces/un/register', {
      body: { name: 't', 'metadata-location': created['metadata-location'] },
    });
    expect(again.status).toBe(200);
    expect(again.json().metadata['table-uuid']).toBe(created.metadata['table-uuid']);
    expect(problems).toEqual([]);
  });
});
