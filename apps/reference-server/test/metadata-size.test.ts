import { readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { backends } from './support/databases.js';
import { call, type Node, newKey, schema, startNode, tableMetadata } from './support/server.js';

// Metadata larger than the catalog holds (METADATA_MAX_BYTES, or what one statement carries to the database:
// MariaDB's max_allowed_packet) is the caller's error: a 400 before any file is written, never a retryable 503
// that no retry can get past, and the table stays as it was.

const metadataFiles = (node: Node) =>
  readdirSync(node.warehouse, { recursive: true, encoding: 'utf8' }).filter((f) =>
    f.endsWith('.metadata.json'),
  );

const wide = (columns: number) => ({
  type: 'struct',
  fields: Array.from({ length: columns }, (_, i) => ({
    id: i + 1,
    name: `c${i + 1}`,
    required: false,
    type: 'string',
  })),
});

/** Table metadata whose `doc` holds `quotes` double quotes: 2 bytes each in JSON, 4 once mysql2 escapes them. */
function quotedMetadata(node: Node, quotes: number) {
  return tableMetadata(pathToFileURL(join(node.warehouse, 'n', 'quoted')).href, {
    schemas: [{ ...schema, doc: '"'.repeat(quotes) }],
  });
}

const expectRefused = (answer: { status: number; text: string; headers: Headers }, pattern: RegExp) => {
  expect(answer.status, answer.text.slice(0, 300)).toBe(400);
  expect(answer.headers.get('retry-after')).toBeNull();
  expect(answer.text).toMatch(pattern);
};

describe('METADATA_MAX_BYTES bounds what the catalog writes, as it bounds what it reads', () => {
  let node: Node;
  beforeAll(async () => {
    node = await startNode('sqlite::memory:', { METADATA_MAX_BYTES: String(64 * 1024) });
    await call(node.url, 'POST', '/v1/namespaces', { body: { namespace: ['n'] } });
  });
  afterAll(async () => node.close());

  test('a create past it: 400, no file', async () => {
    const answer = await call(node.url, 'POST', '/v1/namespaces/n/tables', {
      key: newKey(),
      body: { name: 'wide', schema: wide(2000) },
    });
    expectRefused(answer, /this catalog holds at most 65536/);
    expect(metadataFiles(node)).toEqual([]);
  });

  test('a commit past it: 400, no file, the table as it was and still committing', async () => {
    await call(node.url, 'POST', '/v1/namespaces/n/tables', { body: { name: 't', schema } });
    const before = metadataFiles(node);
    const grow = { requirements: [], updates: [{ action: 'add-schema', schema: wide(2000) }] };
    expectRefused(
      await call(node.url, 'POST', '/v1/namespaces/n/tables/t', { key: newKey(), body: grow }),
      /at most 65536/,
    );
    expect(metadataFiles(node)).toEqual(before);
    const small = { requirements: [], updates: [{ action: 'set-properties', updates: { a: 'b' } }] };
    expect((await call(node.url, 'POST', '/v1/namespaces/n/tables/t', { body: small })).status).toBe(200);
  });
});

const mariadb = backends[1] as (typeof backends)[number];
describe.runIf(await mariadb.up())('MariaDB: metadata past max_allowed_packet', () => {
  let node: Node;
  let db: { url: string; drop(): Promise<void> };
  /** What one statement may carry, as the catalog counts it (escapes included). */
  let maxBytes: number;
  beforeAll(async () => {
    db = await mariadb.fresh();
    node = await startNode(db.url, { IDEMPOTENCY_PURGE_ENABLED: 'false' });
    maxBytes = node.db.valueLimit.maxBytes;
    await call(node.url, 'POST', '/v1/namespaces', { body: { namespace: ['n'] } });
  });
  afterAll(async () => {
    await node.close();
    await db.drop();
  });

  const register = (name: string, quotes: number) => {
    const file = join(node.warehouse, `${name}.metadata.json`);
    writeFileSync(file, JSON.stringify(quotedMetadata(node, quotes)));
    return call(node.url, 'POST', '/v1/namespaces/n/register', {
      key: newKey(),
      body: { name, 'metadata-location': file },
    });
  };

  test('register a file under METADATA_MAX_BYTES that escapes past the packet: 400, not a 503', async () => {
    // About half the packet as a file, more than the packet once escaped.
    expectRefused(await register('big', Math.ceil(maxBytes / 4) + 1024), /database holds at most/);
    expect((await call(node.url, 'HEAD', '/v1/namespaces/n/tables/big')).status).toBe(404);
  });

  test('a commit that would pass the packet: 400, no file, and the table still commits', async () => {
    // Close to the packet once escaped (1.5 MiB short), then a commit of about 2 MiB more.
    const registered = await register('near', Math.floor((maxBytes - 1.5 * 1024 * 1024) / 4));
    expect(registered.status, registered.text.slice(0, 300)).toBe(200);
    const before = metadataFiles(node);
    const grow = {
      requirements: [],
      updates: [{ action: 'set-properties', updates: { quotes: '"'.repeat(480 * 1024) } }],
    };
    const answer = await call(node.url, 'POST', '/v1/namespaces/n/tables/near', {
      key: newKey(),
      body: grow,
    });
    expectRefused(answer, /database holds at most/);
    expect(metadataFiles(node)).toEqual(before);
    const small = { requirements: [], updates: [{ action: 'set-properties', updates: { a: 'b' } }] };
    const after = await call(node.url, 'POST', '/v1/namespaces/n/tables/near', { body: small });
    expect(after.status, after.text.slice(0, 300)).toBe(200);
  });
});
