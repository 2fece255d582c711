import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { insertEntity } from '../src/catalog/repository.js';
import {
  call,
  idempotencyRecords,
  type Node,
  newKey,
  schema,
  startNode,
  tableMetadata,
} from './support/server.js';

const MAX_BYTES = 4096;
let node: Node;
/** A directory outside the warehouse that nothing may touch: it must stay as it is. */
let outside: string;

const SECRET = 'TOP-SECRET-FIRST-BYTES';
beforeAll(async () => {
  node = await startNode('sqlite::memory:', { METADATA_MAX_BYTES: String(MAX_BYTES) });
  outside = mkdtempSync(join(tmpdir(), 'idem-outside-'));
  writeFileSync(join(outside, 'canary'), 'still here');
  writeFileSync(join(outside, 'metadata.json'), JSON.stringify(tableMetadata(pathToFileURL(outside).href)));
  const w = node.warehouse;
  writeFileSync(join(w, 'not-json.json'), `${SECRET} and more`);
  writeFileSync(join(w, 'not-metadata.json'), JSON.stringify({ hello: 'world' }));
  writeFileSync(join(w, 'huge.json'), `{"pad":"${'x'.repeat(MAX_BYTES)}"}`);
  writeFileSync(join(w, 'escaping.json'), JSON.stringify(tableMetadata(pathToFileURL(outside).href)));
  symlinkSync(outside, join(w, 'link-out'));
  symlinkSync(join(outside, 'metadata.json'), join(w, 'linked.json'));
  execFileSync('mkfifo', [join(w, 'fifo.json')]);
  mkdirSync(join(w, 'a-directory'));
  await call(node.url, 'POST', '/v1/namespaces', { body: { namespace: ['w'] } });
});
afterAll(async () => {
  await node.close();
  rmSync(outside, { recursive: true, force: true });
});

/** Nothing was written, moved or deleted outside the warehouse. */
const outsideUntouched = () => expect(readdirSync(outside).sort()).toEqual(['canary', 'metadata.json']);

async function register(metadataLocation: string, key = newKey()) {
  const started = performance.now();
  const answer = await call(node.url, 'POST', '/v1/namespaces/w/register', {
    key,
    body: { name: 'registered', 'metadata-location': metadataLocation },
  });
  return { answer, ms: performance.now() - started, key };
}

describe('register reads only regular files inside the warehouse', () => {
  test.each([
    ['an absolute path outside', () => '/etc/passwd'],
    ['a JSON metadata file outside', () => join(outside, 'metadata.json')],
    ['a ../ escape', () => `${node.warehouse}/../${outside.split('/').pop()}/metadata.json`],
    ['a symlink inside pointing outside', () => join(node.warehouse, 'linked.json')],
    ['a path through a symlinked directory', () => join(node.warehouse, 'link-out', 'metadata.json')],
    ['/proc/self', () => 'file:///proc/self/status'],
    ['a file: URL with a host', () => `file://example.com${node.warehouse}/not-json.json`],
  ])('%s: 403 or 400, no key taken, nothing leaked, at once', async (_name, location) => {
    const { answer, ms, key } = await register(location());
    expect([400, 403]).toContain(answer.status);
    expect(answer.json().error.type).toMatch(/Forbidden|BadRequest/);
    expect(answer.text).not.toMatch(/root:|"format-version"|still here/);
    expect(ms).toBeLessThan(1_000);
    expect(await idempotencyRecords(node, key)).toBe(0);
    expect((await call(node.url, 'HEAD', '/v1/namespaces/w/tables/registered')).status).toBe(404);
    outsideUntouched();
  });

  test.each([
    ['a FIFO', 'fifo.json', /not a regular file/],
    ['a file over METADATA_MAX_BYTES', 'huge.json', /larger than 4096 bytes/],
    ['a file that is not JSON', 'not-json.json', /not JSON/],
    ['JSON that is not table metadata', 'not-metadata.json', /does not hold Iceberg table metadata/],
    ['a directory', 'a-directory', /not a regular file/],
  ])('%s inside the warehouse: a 400 that quotes none of it', async (_name, file, message) => {
    const { answer, ms } = await register(join(node.warehouse, 'w', '..', file));
    expect(answer.status, answer.text).toBe(400);
    expect(answer.json().error.message).toMatch(message);
    expect(answer.text).not.toContain(SECRET);
    expect(ms).toBeLessThan(1_000);
  });

  test('metadata whose own location is outside the warehouse: 403 (commits would write there)', async () => {
    const { answer } = await register(join(node.warehouse, 'escaping.json'));
    expect(answer.status).toBe(403);
    expect(answer.json().error.message).toMatch(/location of the registered metadata/);
  });

  test('a file that fails on its content is a deterministic 400: stored and replayed for its key', async () => {
    const key = newKey();
    const first = await register(join(node.warehouse, 'not-json.json'), key);
    const retry = await register(join(node.warehouse, 'not-json.json'), key);
    expect(first.answer.status).toBe(400);
    expect(retry.answer.text).toBe(first.answer.text);
    expect(retry.answer.headers.get('idempotent-replayed')).toBe('true');
  });

  test('register-view is confined the same way', async () => {
    const answer = await call(node.url, 'POST', '/v1/namespaces/w/register-view', {
      body: { name: 'v', 'metadata-location': join(outside, 'metadata.json') },
    });
    expect(answer.status).toBe(403);
  });
});

describe('locations of tables and views stay inside the warehouse', () => {
  test.each([
    ['the filesystem root', () => 'file:///', 403],
    ['the warehouse itself', () => `${pathToFileURL(node.warehouse).href}/`, 403],
    ['a directory outside', () => outside, 403],
    ['through a symlink', () => join(node.warehouse, 'link-out', 't'), 403],
    ['an s3:// location', () => 's3://bucket/t', 400],
    ['a Windows path', () => 'C:\\warehouse\\t', 400],
    ['a relative path', () => 'w/t', 400],
  ])('create with %s: refused before a key is taken, nothing written', async (_name, location, status) => {
    const key = newKey();
    for (const path of ['tables', 'views']) {
      const answer = await call(node.url, 'POST', `/v1/namespaces/w/${path}`, {
        key,
        body: {
          name: 'placed',
          location: location(),
          schema,
          'view-version': {
            'version-id': 1,
            'timestamp-ms': 1,
            'schema-id': 0,
            summary: {},
            representations: [{ type: 'sql', sql: 'SELECT 1', dialect: 'spark' }],
            'default-namespace': ['w'],
          },
          properties: {},
        },
      });
      expect(answer.status, answer.text).toBe(status);
    }
    expect(await idempotencyRecords(node, key)).toBe(0);
    expect(existsSync(join(node.warehouse, 'metadata'))).toBe(false);
    outsideUntouched();
  });

  test('a location inside (trailing slash and all) is used, and purge removes only it', async () => {
    const location = `${node.warehouse}/custom//place/`;
    const created = await call(node.url, 'POST', '/v1/namespaces/w/tables', {
      body: { name: 'placed', location, schema },
    });
    expect(created.status, created.text).toBe(200);
    expect(created.json()['metadata-location']).toMatch(
      new RegExp(`^${node.warehouse}/custom/place/metadata/`),
    );
    expect(readdirSync(join(node.warehouse, 'custom', 'place', 'metadata'))).toHaveLength(1);
    const dropped = await call(node.url, 'DELETE', '/v1/namespaces/w/tables/placed?purgeRequested=true');
    expect(dropped.status).toBe(204);
    expect(existsSync(join(node.warehouse, 'custom', 'place'))).toBe(false);
    expect(existsSync(join(node.warehouse, 'not-json.json'))).toBe(true);
  });

  test('a commit that sets a location outside is refused before its key is taken; the table is unchanged', async () => {
    const created = await call(node.url, 'POST', '/v1/namespaces/w/tables', {
      body: { name: 'moving', schema },
    });
    const key = newKey();
    const answer = await call(node.url, 'POST', '/v1/namespaces/w/tables/moving', {
      key,
      body: { requirements: [], updates: [{ action: 'set-location', location: join(outside, 'moved') }] },
    });
    expect(answer.status).toBe(403);
    expect(answer.json().error.message).toMatch(/updates\/0\/location must be inside/);
    expect(await idempotencyRecords(node, key)).toBe(0);
    const table = (await call(node.url, 'GET', '/v1/namespaces/w/tables/moving')).json();
    expect(table.metadata.location).toBe(created.json().metadata.location);
    outsideUntouched();
  });

  test("a table's metadata directory swapped for a symlink out: its commit writes nothing there (403), the table is unchanged", async () => {
    const created = await call(node.url, 'POST', '/v1/namespaces/w/tables', {
      body: { name: 'swapped', schema },
    });
    expect(created.status, created.text).toBe(200);
    const location = new URL(created.json().metadata.location).pathname;
    rmSync(join(location, 'metadata'), { recursive: true });
    symlinkSync(outside, join(location, 'metadata'));
    const key = newKey();
    const answer = await call(node.url, 'POST', '/v1/namespaces/w/tables/swapped', {
      key,
      body: { requirements: [], updates: [{ action: 'set-properties', updates: { a: 'b' } }] },
    });
    expect(answer.status, answer.text).toBe(403);
    outsideUntouched();
    const table = (await call(node.url, 'GET', '/v1/namespaces/w/tables/swapped')).json();
    expect(table['metadata-location']).toBe(created.json()['metadata-location']);
    expect(table.metadata.properties).toEqual(created.json().metadata.properties);
  });

  test('drop with purge never deletes the warehouse or anything outside it: 403, nothing dropped', async () => {
    mkdirSync(join(node.warehouse, 'keep'));
    for (const [name, location] of [
      ['at-root', pathToFileURL(node.warehouse).href],
      ['outside', pathToFileURL(outside).href],
      ['remote', 's3://bucket/t'],
    ] as const) {
      // Rows as an older server could have written them, before locations were confined.
      await node.db.transaction((tx) =>
        insertEntity(
          tx,
          { prefix: '', namespace: 'w', name },
          {
            kind: 'table',
            metadataLocation: `${location}/metadata/00000.metadata.json`,
            metadata: tableMetadata(location),
            text: JSON.stringify(tableMetadata(location)),
            path: null,
          },
        ),
      );
      const dropped = await call(node.url, 'DELETE', `/v1/namespaces/w/tables/${name}?purgeRequested=true`);
      expect([400, 403], dropped.text).toContain(dropped.status);
      expect((await call(node.url, 'HEAD', `/v1/namespaces/w/tables/${name}`)).status).toBe(204);
      // Without purge it is only forgotten.
      expect((await call(node.url, 'DELETE', `/v1/namespaces/w/tables/${name}`)).status).toBe(204);
    }
    expect(existsSync(join(node.warehouse, 'keep'))).toBe(true);
    outsideUntouched();
  });
});
