import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { call, type Node, schema, startNode } from './support/server.js';

// write.metadata.delete-after-commit deletes the files that fall out of a table's metadata log. The log is the
// client's to write: a registered metadata file brings its own. So only the table's own files go: files the
// catalog wrote into the metadata directory of the table's location, where no other table lives.

let node: Node;
beforeAll(async () => {
  node = await startNode('sqlite::memory:');
  for (const namespace of ['victims', 'attackers'])
    expect(
      (await call(node.url, 'POST', '/v1/namespaces', { body: { namespace: [namespace] } })).status,
    ).toBe(200);
});
afterAll(async () => node.close());

const local = (location: string) => (location.startsWith('file:') ? fileURLToPath(location) : location);

async function createTable(namespace: string, name: string, properties: Record<string, string> = {}) {
  const created = await call(node.url, 'POST', `/v1/namespaces/${namespace}/tables`, {
    body: { name, schema, properties },
  });
  expect(created.status, created.text).toBe(200);
  return created.json() as { 'metadata-location': string; metadata: Record<string, unknown> };
}

/**
 * As a client with write access to the storage can: a metadata file of the attacker's table whose log names
 * `files`, written next to its own and registered over it; then one commit pushes them out of the log.
 */
async function pushOutOfLog(name: string, files: readonly string[]) {
  const table = await createTable('attackers', name, {
    'write.metadata.previous-versions-max': '1',
    'write.metadata.delete-after-commit.enabled': 'true',
  });
  const current = local(table['metadata-location']);
  const crafted = JSON.parse(readFileSync(current, 'utf8'));
  crafted['metadata-log'] = files.map((file, i) => ({ 'metadata-file': file, 'timestamp-ms': i + 1 }));
  const craftedFile = join(dirname(current), '00007-0190b7e2-5a5d-7c3e-8f00-1234567890ab.metadata.json');
  writeFileSync(craftedFile, JSON.stringify(crafted));
  const registered = await call(node.url, 'POST', '/v1/namespaces/attackers/register', {
    body: { name, 'metadata-location': pathToFileURL(craftedFile).href, overwrite: true },
  });
  expect(registered.status, registered.text).toBe(200);
  const committed = await call(node.url, 'POST', `/v1/namespaces/attackers/tables/${name}`, {
    body: { requirements: [], updates: [{ action: 'set-properties', updates: { n: '1' } }] },
  });
  expect(committed.status, committed.text).toBe(200);
  const log = committed.json().metadata['metadata-log'] as { 'metadata-file': string }[];
  expect(log.map((entry) => entry['metadata-file'])).toEqual([pathToFileURL(craftedFile).href]);
}

describe('files a client names in a metadata log are deleted only when they are the table’s own', () => {
  test('another table’s current metadata file stays, and that table still loads', async () => {
    const victim = await createTable('victims', 'current');
    await pushOutOfLog('steals-current', [victim['metadata-location']]);
    expect(existsSync(local(victim['metadata-location']))).toBe(true);
    expect((await call(node.url, 'GET', '/v1/namespaces/victims/tables/current')).status).toBe(200);
  });

  test('any other file of the warehouse stays: a data file, a file named like metadata in another directory', async () => {
    const victim = await createTable('victims', 'data');
    const location = local(String(victim.metadata.location));
    const data = join(location, 'data-00000.parquet');
    writeFileSync(data, 'rows');
    const lookalike = join(location, '00001-0190b7e2-5a5d-7c3e-8f00-1234567890ab.metadata.json');
    writeFileSync(lookalike, '{}');
    await pushOutOfLog('steals-data', [pathToFileURL(data).href, lookalike, '/etc/hostname']);
    expect(existsSync(data)).toBe(true);
    expect(existsSync(lookalike)).toBe(true);
  });

  test('a table whose own older file is pushed out still deletes it (the control)', async () => {
    const own = await createTable('attackers', 'own', {
      'write.metadata.previous-versions-max': '1',
      'write.metadata.delete-after-commit.enabled': 'true',
    });
    for (const n of ['1', '2']) {
      const committed = await call(node.url, 'POST', '/v1/namespaces/attackers/tables/own', {
        body: { requirements: [], updates: [{ action: 'set-properties', updates: { n } }] },
      });
      expect(committed.status, committed.text).toBe(200);
    }
    expect(existsSync(local(own['metadata-location']))).toBe(false);
  });
});
