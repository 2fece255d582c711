import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { view } from './support/hostile.js';
import { call, type Node, schema, startNode } from './support/server.js';

// A drop with purge deletes its table's directory, never files of a table or view still in the catalog: default
// locations never overlap (prefix, namespace, name and a UUID), and a purge whose directory holds, or lies
// inside, another live location (a client may place a table anywhere in the warehouse) is skipped: the table is
// dropped (204) and its files stay.

let node: Node;
beforeAll(async () => {
  node = await startNode('sqlite::memory:');
});
afterAll(async () => node.close());

const local = (location: string) => (location.startsWith('file:') ? fileURLToPath(location) : location);

/** The table's current metadata file and its location directory, as local paths. */
async function filesOf(path: string) {
  const loaded = await call(node.url, 'GET', path);
  expect(loaded.status, loaded.text).toBe(200);
  const { metadata } = loaded.json();
  return {
    file: local(loaded.json()['metadata-location']),
    directory: local(metadata.location),
  };
}

const createNamespace = (prefix: string, namespace: string[], url = node.url) =>
  call(url, 'POST', `/v1${prefix}/namespaces`, { body: { namespace } });

async function createTable(path: string, body: Record<string, unknown>) {
  const created = await call(node.url, 'POST', path, { body: { schema, ...body } });
  expect(created.status, created.text).toBe(200);
  return created.json();
}

async function purge(path: string) {
  const dropped = await call(node.url, 'DELETE', `${path}?purgeRequested=true`);
  expect(dropped.status, dropped.text).toBe(204);
  expect((await call(node.url, 'HEAD', path)).status).toBe(404);
}

describe('default locations never overlap', () => {
  test('the same namespace and name under two catalog prefixes', async () => {
    for (const prefix of ['/tenantA', '/tenantB']) {
      await createNamespace(prefix, ['sales']);
      await createTable(`/v1${prefix}/namespaces/sales/tables`, { name: 'orders' });
    }
    const a = await filesOf('/v1/tenantA/namespaces/sales/tables/orders');
    const b = await filesOf('/v1/tenantB/namespaces/sales/tables/orders');
    await purge('/v1/tenantA/namespaces/sales/tables/orders');
    expect(existsSync(a.directory)).toBe(false);
    expect(existsSync(b.file)).toBe(true);
  });

  test('a table renamed away, and a new table under its old name', async () => {
    await createNamespace('', ['r']);
    await createTable('/v1/namespaces/r/tables', { name: 'old' });
    const renamed = await call(node.url, 'POST', '/v1/tables/rename', {
      body: { source: { namespace: ['r'], name: 'old' }, destination: { namespace: ['r'], name: 'kept' } },
    });
    expect(renamed.status).toBe(204);
    const kept = await filesOf('/v1/namespaces/r/tables/kept');
    await createTable('/v1/namespaces/r/tables', { name: 'old' });
    await purge('/v1/namespaces/r/tables/old');
    expect(existsSync(kept.file)).toBe(true);
  });

  test('table n.a and the tables of namespace n.a', async () => {
    await createNamespace('', ['n']);
    await createNamespace('', ['n', 'a']);
    await createTable('/v1/namespaces/n/tables', { name: 'a' });
    await createTable('/v1/namespaces/n%1Fa/tables', { name: 'child' });
    const child = await filesOf('/v1/namespaces/n%1Fa/tables/child');
    await purge('/v1/namespaces/n/tables/a');
    expect(existsSync(child.file)).toBe(true);
  });
});

describe('a purge that would reach a live location is skipped, the drop is not', () => {
  test('a table placed inside another table: neither purge deletes the other', async () => {
    await createNamespace('', ['p']);
    await createTable('/v1/namespaces/p/tables', { name: 'outer' });
    const outer = await filesOf('/v1/namespaces/p/tables/outer');
    await createTable('/v1/namespaces/p/tables', { name: 'inner', location: `${outer.directory}/inner` });
    const inner = await filesOf('/v1/namespaces/p/tables/inner');

    await purge('/v1/namespaces/p/tables/outer');
    expect(existsSync(inner.file)).toBe(true);
    expect(existsSync(outer.file)).toBe(true); // skipped: it holds inner's directory

    await createTable('/v1/namespaces/p/tables', { name: 'outer2', location: outer.directory });
    await purge('/v1/namespaces/p/tables/inner');
    expect(existsSync(inner.file)).toBe(true); // skipped: it lies inside outer2's directory
  });

  test('across catalog prefixes, and for a view', async () => {
    await createNamespace('/victim', ['v']);
    await createTable('/v1/victim/namespaces/v/tables', { name: 't' });
    const victim = await filesOf('/v1/victim/namespaces/v/tables/t');
    await createNamespace('/intruder', ['i']);
    await createTable('/v1/intruder/namespaces/i/tables', { name: 't', location: dirname(victim.directory) });
    await purge('/v1/intruder/namespaces/i/tables/t');
    expect(existsSync(victim.file)).toBe(true);

    const placedView = await call(node.url, 'POST', '/v1/intruder/namespaces/i/views', {
      body: {
        ...view,
        name: 'v',
        location: `${victim.directory}/view`,
        'view-version': { ...view['view-version'], 'default-namespace': ['i'] },
      },
    });
    expect(placedView.status, placedView.text).toBe(200);
    await purge('/v1/victim/namespaces/v/tables/t');
    expect(existsSync(local(placedView.json()['metadata-location']))).toBe(true);
  });

  test('one metadata file registered under two names: dropping one with purge keeps the other', async () => {
    await createNamespace('', ['twice']);
    const first = await createTable('/v1/namespaces/twice/tables', { name: 'first' });
    const registered = await call(node.url, 'POST', '/v1/namespaces/twice/register', {
      body: { name: 'second', 'metadata-location': first['metadata-location'] },
    });
    expect(registered.status, registered.text).toBe(200);
    await purge('/v1/namespaces/twice/tables/first');
    const second = await filesOf('/v1/namespaces/twice/tables/second');
    expect(existsSync(second.file)).toBe(true);
  });
});

test('a catalog an older server made gains the location column; a row without one makes a purge skip', async () => {
  const directory = mkdtempSync(join(tmpdir(), 'idem-older-'));
  const file = join(directory, 'catalog.db');
  try {
    const first = await startNode(`sqlite:${file}`);
    await createNamespace('', ['o'], first.url);
    await first.close();
    const older = new Database(file);
    older.exec('ALTER TABLE catalog_entities DROP COLUMN location');
    older.close();

    const again = await startNode(`sqlite:${file}`);
    try {
      const t = await call(again.url, 'POST', '/v1/namespaces/o/tables', { body: { name: 't', schema } });
      expect(t.status, t.text).toBe(200);
      const u = await call(again.url, 'POST', '/v1/namespaces/o/tables', { body: { name: 'u', schema } });
      // As an older server left it: no location known.
      await again.db.run(sql`UPDATE catalog_entities SET location = NULL WHERE name = ${'u'}`);
      const dropped = await call(again.url, 'DELETE', '/v1/namespaces/o/tables/t?purgeRequested=true');
      expect(dropped.status).toBe(204);
      expect(existsSync(local(t.json()['metadata-location']))).toBe(true);
      expect(existsSync(local(u.json()['metadata-location']))).toBe(true);
    } finally {
      await again.close();
    }
  } finally {
    rmSync(directory, { recursive: true, force: true });
  }
});
