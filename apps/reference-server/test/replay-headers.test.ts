import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { backends } from './support/databases.js';
import { view } from './support/hostile.js';
import { type Answer, call, type Node, newKey, schema, startNode } from './support/server.js';

// A replay is the stored answer as it went out: the same status, the same bytes and every header the first
// answer carried (content-type with its charset, location, etag …), but for the replay marker and the headers
// of the hop and the hour. Before: the first answer said `application/json; charset=utf-8` (Fastify adds the
// charset to a string body) and every replay, like the stored record, `application/json`.

/** Headers that belong to the connection or the time, not to the answer. */
const NOT_THE_ANSWER = new Set([
  'date',
  'connection',
  'keep-alive',
  'transfer-encoding',
  'idempotent-replayed',
]);

function answerHeaders(answer: Answer): Record<string, string> {
  const headers: Record<string, string> = {};
  answer.headers.forEach((value, name) => {
    if (!NOT_THE_ANSWER.has(name)) headers[name] = value;
  });
  return headers;
}

interface Kind {
  readonly name: string;
  readonly method: string;
  readonly path: string;
  readonly body?: unknown;
}

/**
 * Every keyed mutation the catalog has, each on entities of its own, and a refusal (409) among them. (A staged
 * create commits nothing and stores no answer: it is not one.)
 */
function kinds(tableLocation: string, viewLocation: string): Kind[] {
  const tableId = (name: string) => ({ namespace: ['h'], name });
  const newView = (name: string) => ({
    ...view,
    name,
    'view-version': { ...view['view-version'], 'default-namespace': ['h'] },
  });
  return [
    { name: 'namespace create', method: 'POST', path: '/v1/namespaces', body: { namespace: ['created'] } },
    {
      name: 'namespace create refused (409)',
      method: 'POST',
      path: '/v1/namespaces',
      body: { namespace: ['h'] },
    },
    {
      name: 'namespace properties',
      method: 'POST',
      path: '/v1/namespaces/h/properties',
      body: { updates: { a: 'ü€😀' }, removals: [] },
    },
    { name: 'namespace drop', method: 'DELETE', path: '/v1/namespaces/empty' },
    { name: 'table create', method: 'POST', path: '/v1/namespaces/h/tables', body: { name: 'made', schema } },
    {
      name: 'table commit',
      method: 'POST',
      path: '/v1/namespaces/h/tables/t',
      body: { requirements: [], updates: [{ action: 'set-properties', updates: { k: 'v' } }] },
    },
    {
      name: 'transaction commit',
      method: 'POST',
      path: '/v1/transactions/commit',
      body: {
        'table-changes': [
          {
            identifier: tableId('t'),
            requirements: [],
            updates: [{ action: 'set-properties', updates: { tx: '1' } }],
          },
        ],
      },
    },
    {
      name: 'table rename',
      method: 'POST',
      path: '/v1/tables/rename',
      body: { source: tableId('to-rename'), destination: tableId('renamed') },
    },
    { name: 'table drop', method: 'DELETE', path: '/v1/namespaces/h/tables/to-drop' },
    {
      name: 'table drop and purge',
      method: 'DELETE',
      path: '/v1/namespaces/h/tables/to-purge?purgeRequested=true',
    },
    {
      name: 'table register',
      method: 'POST',
      path: '/v1/namespaces/h/register',
      body: { name: 'registered', 'metadata-location': tableLocation },
    },
    { name: 'table unregister', method: 'POST', path: '/v1/namespaces/h/tables/to-unregister/unregister' },
    { name: 'view create', method: 'POST', path: '/v1/namespaces/h/views', body: newView('made-view') },
    {
      name: 'view replace',
      method: 'POST',
      path: '/v1/namespaces/h/views/v',
      body: { updates: [{ action: 'set-properties', updates: { k: 'v' } }] },
    },
    {
      name: 'view rename',
      method: 'POST',
      path: '/v1/views/rename',
      body: { source: tableId('view-to-rename'), destination: tableId('view-renamed') },
    },
    { name: 'view drop', method: 'DELETE', path: '/v1/namespaces/h/views/view-to-drop' },
    {
      name: 'view register',
      method: 'POST',
      path: '/v1/namespaces/h/register-view',
      body: { name: 'registered-view', 'metadata-location': viewLocation },
    },
  ];
}

async function prepare(node: Node): Promise<{ table: string; view: string }> {
  const made = async (method: string, path: string, body?: unknown) => {
    const answer = await call(node.url, method, path, body === undefined ? {} : { body });
    expect(answer.status, `${method} ${path}: ${answer.text}`).toBeLessThan(300);
    return answer;
  };
  await made('POST', '/v1/namespaces', { namespace: ['h'] });
  await made('POST', '/v1/namespaces', { namespace: ['empty'] });
  await made('POST', '/v1/namespaces/h/tables', { name: 't', schema });
  const table = (await made('POST', '/v1/namespaces/h/tables', { name: 'source', schema })).json();
  for (const name of ['to-rename', 'to-drop', 'to-purge', 'to-unregister'])
    await made('POST', '/v1/namespaces/h/tables', { name, schema });
  const newView = (name: string) => ({
    ...view,
    name,
    'view-version': { ...view['view-version'], 'default-namespace': ['h'] },
  });
  await made('POST', '/v1/namespaces/h/views', newView('v'));
  await made('POST', '/v1/namespaces/h/views', newView('view-to-rename'));
  await made('POST', '/v1/namespaces/h/views', newView('view-to-drop'));
  const source = (await made('POST', '/v1/namespaces/h/views', newView('view-source'))).json();
  // Registered under new names: the same files, read again (dropped without a purge, the files stay).
  await made('DELETE', '/v1/namespaces/h/tables/source');
  await made('DELETE', '/v1/namespaces/h/views/view-source');
  return { table: table['metadata-location'], view: source['metadata-location'] };
}

function suite(name: string, open: () => Promise<{ node: Node; done(): Promise<void> }>) {
  describe(`replays carry the first answer's headers and bytes (${name})`, () => {
    let node: Node;
    let done: () => Promise<void>;
    let locations: { table: string; view: string };
    beforeAll(async () => {
      ({ node, done } = await open());
      locations = await prepare(node);
    }, 60_000);
    afterAll(async () => done?.());

    test('every keyed mutation kind: same status, bytes and headers', async () => {
      const mismatches: string[] = [];
      for (const kind of kinds(locations.table, locations.view)) {
        const key = newKey();
        const options = kind.body === undefined ? { key } : { key, body: kind.body };
        const first = await call(node.url, kind.method, kind.path, options);
        const replay = await call(node.url, kind.method, kind.path, options);
        expect(first.status, `${kind.name}: ${first.text}`).toBeLessThan(
          kind.name.includes('409') ? 410 : 300,
        );
        expect(first.headers.get('idempotent-replayed'), kind.name).toBeNull();
        expect(replay.headers.get('idempotent-replayed'), kind.name).toBe('true');
        if (replay.status !== first.status)
          mismatches.push(`${kind.name}: status ${first.status} → ${replay.status}`);
        if (replay.text !== first.text) mismatches.push(`${kind.name}: body differs`);
        const [a, b] = [answerHeaders(first), answerHeaders(replay)];
        for (const header of new Set([...Object.keys(a), ...Object.keys(b)]))
          if (a[header] !== b[header])
            mismatches.push(
              `${kind.name}: ${header} ${JSON.stringify(a[header])} → ${JSON.stringify(b[header])}`,
            );
      }
      expect(mismatches).toEqual([]);
    }, 60_000);

    test('the stored record holds the content type the first answer went out with', async () => {
      const key = newKey();
      const first = await call(node.url, 'POST', '/v1/namespaces', { key, body: { namespace: ['stored'] } });
      expect(first.headers.get('content-type')).toBe('application/json; charset=utf-8');
      const { DEFAULT_TABLE } = await import('@idem/store-sql');
      const { sql } = await import('drizzle-orm');
      const [row] = await node.db.rows(
        sql`SELECT response_headers AS h FROM ${sql.identifier(DEFAULT_TABLE)} WHERE idem_key = ${key}`,
      );
      const headers = typeof row?.h === 'string' ? JSON.parse(row.h) : row?.h;
      expect(headers).toEqual({ 'content-type': 'application/json; charset=utf-8' });
    });
  });
}

suite('SQLite', async () => {
  const node = await startNode('sqlite::memory:');
  return { node, done: () => node.close() };
});

const postgres = backends.find((backend) => backend.name === 'PostgreSQL');
if (postgres !== undefined && (await postgres.up())) {
  suite('PostgreSQL', async () => {
    const database = await postgres.fresh();
    const node = await startNode(database.url);
    return {
      node,
      async done() {
        await node.close();
        await database.drop();
      },
    };
  });
}
