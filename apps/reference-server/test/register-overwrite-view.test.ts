import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { view } from './support/hostile.js';
import { checkResponse } from './support/openapi.js';
import { call, type Node, schema, startNodeWithTable } from './support/server.js';

// Tables and views share names: `register` with `overwrite: true` replaces a table, never a view (the view's row
// would keep kind 'view' and hold table metadata, and every later view commit would be a 500).

let node: Node;
beforeAll(async () => {
  node = await startNodeWithTable();
  const created = await call(node.url, 'POST', '/v1/namespaces/n/views', {
    body: { ...view, name: 'v', 'view-version': { ...view['view-version'], 'default-namespace': ['n'] } },
  });
  expect(created.status, created.text).toBe(200);
});
afterAll(async () => node.close());

describe('register with overwrite over a view', () => {
  test('is a 409 AlreadyExists, and the view stays a view that commits', async () => {
    const table = (await call(node.url, 'GET', '/v1/namespaces/n/tables/t')).json();
    const answer = await call(node.url, 'POST', '/v1/namespaces/n/register', {
      body: { name: 'v', 'metadata-location': table['metadata-location'], overwrite: true },
    });
    expect(answer.status, answer.text).toBe(409);
    expect(answer.json().error).toMatchObject({ type: 'AlreadyExistsException', code: 409 });

    const loaded = await call(node.url, 'GET', '/v1/namespaces/n/views/v');
    expect(checkResponse('GET', '/v1/namespaces/n/views/v', loaded.status, loaded.text)).toEqual([]);
    expect(loaded.json().metadata['view-uuid']).toBeTypeOf('string');
    const commit = await call(node.url, 'POST', '/v1/namespaces/n/views/v', {
      body: { updates: [{ action: 'set-properties', updates: { a: 'b' } }] },
    });
    expect(commit.status, commit.text).toBe(200);
  });

  test('over a table it still replaces the table', async () => {
    await call(node.url, 'POST', '/v1/namespaces/n/tables', { body: { name: 'other', schema } });
    const other = (await call(node.url, 'GET', '/v1/namespaces/n/tables/other')).json();
    const answer = await call(node.url, 'POST', '/v1/namespaces/n/register', {
      body: { name: 't', 'metadata-location': other['metadata-location'], overwrite: true },
    });
    expect(answer.status, answer.text).toBe(200);
    const loaded = (await call(node.url, 'GET', '/v1/namespaces/n/tables/t')).json();
    expect(loaded.metadata['table-uuid']).toBe(other.metadata['table-uuid']);
  });
});
