import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { DEFAULT_TABLE } from '@idem/store-sql';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { checkResponse } from './support/openapi.js';
import { call, type Node, newKey, startNode, tableMetadata } from './support/server.js';

// An answer larger than an idempotency record holds (1 MiB) is stored compact (its metadata-location and UUID)
// and its replay rebuilt: never a 200 with no body. A load result shows the table as it is now, else the file
// it was answered with; a commit's answer is the one it gave, from the file the commit wrote.

let node: Node;
beforeAll(async () => {
  node = await startNode('sqlite::memory:');
  await call(node.url, 'POST', '/v1/namespaces', { body: { namespace: ['n'] } });
});
afterAll(async () => node.close());

const wide = (columns: number, from = 1) => ({
  type: 'struct',
  fields: Array.from({ length: columns }, (_, i) => ({
    id: from + i,
    name: `c${from + i}`,
    required: false,
    type: 'string',
  })),
});

/** A metadata file in the warehouse: table `name`, with schemas of `columns` columns in all. */
function metadataFile(name: string, columns: number, extra: Record<string, unknown> = {}): string {
  const file = join(node.warehouse, `${name}.metadata.json`);
  const metadata = tableMetadata(pathToFileURL(join(node.warehouse, 'n', name)).href, {
    'table-uuid': `9c12d441-03fe-4693-9a96-${String(columns).padStart(12, '0')}`,
    'last-column-id': columns,
    schemas: [{ ...wide(columns), 'schema-id': 0 }],
    ...extra,
  });
  writeFileSync(file, JSON.stringify(metadata));
  return file;
}

/** The stored body of a key's record, in bytes. */
async function recordBytes(key: string): Promise<number> {
  const [row] = await node.db.rows(
    sql`SELECT response_body AS body FROM ${sql.identifier(DEFAULT_TABLE)} WHERE idem_key = ${key}`,
  );
  return (row?.body as Buffer | null)?.length ?? 0;
}

const replayed = (answer: { headers: Headers }) => answer.headers.get('idempotent-replayed');

describe('an answer over 1 MiB', () => {
  test('register: replays the table as it is now, then the file it was answered with, then what was stored', async () => {
    const file = metadataFile('big', 25_000);
    const key = newKey();
    const request = { name: 'big', 'metadata-location': file };
    const first = await call(node.url, 'POST', '/v1/namespaces/n/register', { key, body: request });
    expect(first.status, first.text.slice(0, 300)).toBe(200);
    expect(first.text.length).toBeGreaterThan(1024 * 1024);
    expect(await recordBytes(key)).toBeLessThan(1024);

    const again = await call(node.url, 'POST', '/v1/namespaces/n/register', { key, body: request });
    expect(replayed(again)).toBe('true');
    expect(again.text).toBe(first.text);
    // Rebuilt, with the headers the first answer went out with.
    expect(again.headers.get('content-type')).toBe('application/json; charset=utf-8');
    expect(again.headers.get('content-type')).toBe(first.headers.get('content-type'));
    expect(checkResponse('POST', '/v1/namespaces/n/register', again.status, again.text)).toEqual([]);

    // Changed since: the replay shows it now.
    await call(node.url, 'POST', '/v1/namespaces/n/tables/big', {
      body: { requirements: [], updates: [{ action: 'set-properties', updates: { later: 'yes' } }] },
    });
    const changed = await call(node.url, 'POST', '/v1/namespaces/n/register', { key, body: request });
    expect(changed.json().metadata.properties).toEqual({ later: 'yes' });
    expect(changed.headers.get('content-type')).toBe(first.headers.get('content-type'));

    // Gone from the catalog: the file it was answered with.
    await call(node.url, 'POST', '/v1/namespaces/n/tables/big/unregister');
    const gone = await call(node.url, 'POST', '/v1/namespaces/n/register', { key, body: request });
    expect(gone.json()['metadata-location']).toBe(file);
    expect(gone.json().metadata.schemas[0].fields).toHaveLength(25_000);

    // The file gone too: what was stored, the metadata-location and the table's UUID.
    rmSync(file);
    const stored = await call(node.url, 'POST', '/v1/namespaces/n/register', { key, body: request });
    expect(stored.status).toBe(200);
    expect(stored.json()).toEqual({
      'metadata-location': file,
      metadata: { 'table-uuid': first.json().metadata['table-uuid'] },
      config: {},
    });
  });

  test('commit: replays the answer it gave, even after later commits', async () => {
    await call(node.url, 'POST', '/v1/namespaces/n/tables', {
      body: { name: 'grown', schema: wide(12_000) },
    });
    const key = newKey();
    const body = {
      requirements: [],
      updates: [
        { action: 'add-schema', schema: wide(6_000, 12_001) },
        { action: 'set-current-schema', 'schema-id': -1 },
      ],
    };
    const first = await call(node.url, 'POST', '/v1/namespaces/n/tables/grown', { key, body });
    expect(first.status, first.text.slice(0, 300)).toBe(200);
    expect(first.text.length).toBeGreaterThan(1024 * 1024);
    expect(await recordBytes(key)).toBeLessThan(1024);
    await call(node.url, 'POST', '/v1/namespaces/n/tables/grown', {
      body: { requirements: [], updates: [{ action: 'set-properties', updates: { later: 'yes' } }] },
    });
    const again = await call(node.url, 'POST', '/v1/namespaces/n/tables/grown', { key, body });
    expect(replayed(again)).toBe('true');
    expect(again.text).toBe(first.text);
    expect(again.headers.get('content-type')).toBe('application/json; charset=utf-8');
    expect(again.headers.get('content-length')).toBe(first.headers.get('content-length'));
  });
});

test('a registered file nested as deep as a metadata file may be (1024 levels): register and commit replay', async () => {
  let deep: unknown = 'x';
  for (let i = 0; i < 1023; i++) deep = [deep];
  const request = { name: 'deep', 'metadata-location': metadataFile('deep', 2, { 'x-extra': deep }) };
  const key = newKey();
  const first = await call(node.url, 'POST', '/v1/namespaces/n/register', { key, body: request });
  expect(first.status, first.text.slice(0, 300)).toBe(200);
  const again = await call(node.url, 'POST', '/v1/namespaces/n/register', { key, body: request });
  expect(replayed(again)).toBe('true');
  expect(again.text).toBe(first.text);

  const commitKey = newKey();
  const commit = { requirements: [], updates: [{ action: 'set-properties', updates: { a: 'b' } }] };
  const committed = await call(node.url, 'POST', '/v1/namespaces/n/tables/deep', {
    key: commitKey,
    body: commit,
  });
  expect(committed.status, committed.text.slice(0, 300)).toBe(200);
  const replay = await call(node.url, 'POST', '/v1/namespaces/n/tables/deep', {
    key: commitKey,
    body: commit,
  });
  expect(replayed(replay)).toBe('true');
  expect(replay.text).toBe(committed.text);
});

test("a commit's answer within the record's cap is stored as it was sent, and replays so once its file is purged", async () => {
  await call(node.url, 'POST', '/v1/namespaces/n/tables', { body: { name: 'small', schema: wide(2) } });
  const key = newKey();
  const body = { requirements: [], updates: [{ action: 'set-properties', updates: { a: 'b' } }] };
  const first = await call(node.url, 'POST', '/v1/namespaces/n/tables/small', { key, body });
  expect(first.status, first.text.slice(0, 300)).toBe(200);
  const [row] = await node.db.rows(
    sql`SELECT response_body AS body FROM ${sql.identifier(DEFAULT_TABLE)} WHERE idem_key = ${key}`,
  );
  expect(String(row?.body)).toBe(first.text);
  expect((await call(node.url, 'DELETE', '/v1/namespaces/n/tables/small?purgeRequested=true')).status).toBe(
    204,
  );
  const again = await call(node.url, 'POST', '/v1/namespaces/n/tables/small', { key, body });
  expect(replayed(again)).toBe('true');
  expect(again.text).toBe(first.text);
});
