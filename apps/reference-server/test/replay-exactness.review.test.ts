import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { parseLosslessJson, stringifyLosslessJson } from '../src/catalog/lossless-json.js';
import { registeredTableMetadata } from '../src/catalog/table-metadata.js';
import { view } from './support/hostile.js';
import { checkResponse } from './support/openapi.js';
import { call, type Node, newKey, schema, startNode, tableMetadata } from './support/server.js';

// Review of the 2026-12-02 changes. At 6660867 every metadata answer was stored compact and its replay rebuilt
// (a load result from the table as it is now, else the file; a commit's and an unregister's answer from the file
// named in it, else the table as it is now by UUID, else the compact record): the tests marked "failed at
// 6660867" failed there and pass before it (cf0cdd8) and since c6f1706, which stores answers as rendered again
// (compact only past the record's 1 MiB cap, where the same replays still apply). The corrupt-column test fails
// on HEAD too: loads send the stored text unparsed since 094856d.

let node: Node;
beforeAll(async () => {
  node = await startNode('sqlite::memory:');
  await call(node.url, 'POST', '/v1/namespaces', { body: { namespace: ['n'] } });
});
afterAll(async () => node.close());

const replayed = (answer: { headers: Headers }) => answer.headers.get('idempotent-replayed');
const setProps = (updates: Record<string, string>) => ({
  requirements: [],
  updates: [{ action: 'set-properties', updates }],
});

/**
 * A table metadata file as another tool (Iceberg's Java TableMetadataParser) writes it: pretty-printed, its
 * members in its own order (`properties`, `snapshots`, `refs`, the logs after the specs), with values that have
 * more than one JSON text (1.0, 1E2, a long past 2^53, an escaped character, a duplicate key).
 */
function foreignTableFile(name: string, uuid: string): string {
  const location = pathToFileURL(join(node.warehouse, 'n', name)).href;
  const text = `{
  "format-version" : 2,
  "table-uuid" : "${uuid}",
  "location" : "${location}",
  "last-sequence-number" : 0,
  "last-updated-ms" : 1.0,
  "last-column-id" : 2,
  "current-schema-id" : 0,
  "schemas" : ${JSON.stringify([schema])},
  "default-spec-id" : 0,
  "partition-specs" : [ { "spec-id" : 0, "fields" : [ ] } ],
  "last-partition-id" : 999,
  "default-sort-order-id" : 0,
  "sort-orders" : [ { "order-id" : 0, "fields" : [ ] } ],
  "properties" : { "owner" : "\\u00e9", "owner" : "java", "__proto__" : "p" },
  "x-extra" : [ 9223372036854775807, 1E2, 1e-7, -0.0 ],
  "current-snapshot-id" : -1,
  "refs" : { },
  "snapshots" : [ ],
  "statistics" : [ ],
  "snapshot-log" : [ ],
  "metadata-log" : [ ]
}`;
  const file = join(node.warehouse, `${name}.metadata.json`);
  writeFileSync(file, text);
  return file;
}

describe('first answers: the text stringifyLosslessJson would have written (held)', () => {
  test('register, GET (ETag, 304, HEAD), content-type and content-length', async () => {
    const file = foreignTableFile('reg', '9c12d441-03fe-4693-9a96-00000000e001');
    const first = await call(node.url, 'POST', '/v1/namespaces/n/register', {
      key: newKey(),
      body: { name: 'reg', 'metadata-location': file },
    });
    expect(first.status, first.text).toBe(200);
    const { readFileSync } = await import('node:fs');
    const metadata = registeredTableMetadata(
      parseLosslessJson(readFileSync(file, 'utf8'), { maxDepth: 1024 }),
    );
    expect(first.text).toBe(stringifyLosslessJson({ 'metadata-location': file, metadata, config: {} }));
    const loaded = await call(node.url, 'GET', '/v1/namespaces/n/tables/reg');
    expect(loaded.text).toBe(first.text);
    expect(loaded.headers.get('content-type')).toBe('application/json; charset=utf-8');
    expect(loaded.headers.get('content-length')).toBe(String(Buffer.byteLength(loaded.text)));
    const etag = loaded.headers.get('etag') as string;
    expect(etag).toBe(`"${Buffer.from(file).toString('base64url')}"`);
    const notModified = await fetch(`${node.url}/v1/namespaces/n/tables/reg`, {
      headers: { 'if-none-match': etag },
    });
    expect(notModified.status).toBe(304);
    const head = await fetch(`${node.url}/v1/namespaces/n/tables/reg`, { method: 'HEAD' });
    expect(head.status).toBe(204);
  });
});

describe('replays that are byte-identical (held)', () => {
  test('commit with 64-bit ids and escapes: replay identical after a rename and a later commit; transactions/commit 204', async () => {
    await call(node.url, 'POST', '/v1/namespaces/n/tables', { body: { name: 'longs', schema } });
    const raw =
      '{"requirements":[],"updates":[{"action":"add-snapshot","snapshot":{"snapshot-id":9223372036854775807,' +
      '"sequence-number":1,"timestamp-ms":1700000000000,"manifest-list":"file:/m/\\u2028\\"q","summary":' +
      '{"operation":"append","x":"\\ud83d\\ude00"}}},{"action":"set-snapshot-ref","ref-name":"main","type":"branch",' +
      '"snapshot-id":9223372036854775807}]}';
    const key = newKey();
    const headers = { 'content-type': 'application/json', 'idempotency-key': key };
    const send = () =>
      fetch(`${node.url}/v1/namespaces/n/tables/longs`, { method: 'POST', headers, body: raw });
    const first = await send();
    const firstText = await first.text();
    expect(first.status, firstText).toBe(200);
    const loaded = await call(node.url, 'GET', '/v1/namespaces/n/tables/longs');
    expect(loaded.text).toBe(`${firstText.slice(0, -1)},"config":{}}`);
    expect(
      (
        await call(node.url, 'POST', '/v1/tables/rename', {
          body: {
            source: { namespace: ['n'], name: 'longs' },
            destination: { namespace: ['n'], name: 'longs2' },
          },
        })
      ).status,
    ).toBe(204);
    await call(node.url, 'POST', '/v1/namespaces/n/tables/longs2', { body: setProps({ later: 'x' }) });
    const again = await send();
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(await again.text()).toBe(firstText);
    expect(again.headers.get('content-length')).toBe(first.headers.get('content-length'));
    expect(again.headers.get('content-type')).toBe(first.headers.get('content-type'));

    const txKey = newKey();
    const tx = {
      'table-changes': [{ identifier: { namespace: ['n'], name: 'longs2' }, ...setProps({ t: 'x' }) }],
    };
    const t1 = await call(node.url, 'POST', '/v1/transactions/commit', { key: txKey, body: tx });
    const t2 = await call(node.url, 'POST', '/v1/transactions/commit', { key: txKey, body: tx });
    expect([t1.status, t2.status, t2.text, replayed(t2)]).toEqual([204, 204, '', 'true']);
  });

  test('view replace: replay identical while the view is unchanged', async () => {
    await call(node.url, 'POST', '/v1/namespaces/n/views', {
      body: { ...view, name: 'vr', 'view-version': { ...view['view-version'], 'default-namespace': ['n'] } },
    });
    const key = newKey();
    const body = { updates: [{ action: 'set-properties', updates: { a: '\u00e9' } }] };
    const first = await call(node.url, 'POST', '/v1/namespaces/n/views/vr', { key, body });
    expect(first.status, first.text).toBe(200);
    const again = await call(node.url, 'POST', '/v1/namespaces/n/views/vr', { key, body });
    expect(replayed(again)).toBe('true');
    expect(again.text).toBe(first.text);
    expect((await call(node.url, 'GET', '/v1/namespaces/n/views/vr')).text).toBe(first.text);
  });
});

describe('replays that are no longer the answer that was given', () => {
  test('unregister of a registered table: the replay is the answer, not the file re-serialized (key order, defaults)', async () => {
    const file = foreignTableFile('unreg', '9c12d441-03fe-4693-9a96-00000000e002');
    const registered = await call(node.url, 'POST', '/v1/namespaces/n/register', {
      body: { name: 'unreg', 'metadata-location': file },
    });
    expect(registered.status, registered.text).toBe(200);
    const key = newKey();
    const first = await call(node.url, 'POST', '/v1/namespaces/n/tables/unreg/unregister', { key });
    expect(first.status, first.text).toBe(200);
    const again = await call(node.url, 'POST', '/v1/namespaces/n/tables/unreg/unregister', { key });
    expect(replayed(again)).toBe('true');
    // Same value, other text: the registered file's member order, not the catalog's.
    expect(again.json()).toEqual(first.json());
    expect(again.text).toBe(first.text); // failed at 6660867: replay rebuilt from the raw registered file
  });

  test('unregister, then the registered file removed: the replay is the UnregisterTableResult, not a compact record', async () => {
    const file = foreignTableFile('unreg2', '9c12d441-03fe-4693-9a96-00000000e003');
    await call(node.url, 'POST', '/v1/namespaces/n/register', {
      body: { name: 'unreg2', 'metadata-location': file },
    });
    const key = newKey();
    const path = '/v1/namespaces/n/tables/unreg2/unregister';
    const first = await call(node.url, 'POST', path, { key });
    expect(checkResponse('POST', path, first.status, first.text)).toEqual([]);
    rmSync(file); // the client's own file, no longer the catalog's after unregister
    const again = await call(node.url, 'POST', path, { key });
    expect(replayed(again)).toBe('true');
    // failed at 6660867: {"metadata-location":…,"metadata":{"table-uuid":…}}: `metadata` is no TableMetadata.
    expect(checkResponse('POST', path, again.status, again.text)).toEqual([]);
    expect(again.text).toBe(first.text);
  });

  test('commit, then drop with purge: the replay is the CommitTableResponse, not a compact record', async () => {
    await call(node.url, 'POST', '/v1/namespaces/n/tables', { body: { name: 'purged', schema } });
    const key = newKey();
    const path = '/v1/namespaces/n/tables/purged';
    const first = await call(node.url, 'POST', path, { key, body: setProps({ a: 'b' }) });
    expect(checkResponse('POST', path, first.status, first.text)).toEqual([]);
    expect((await call(node.url, 'DELETE', `${path}?purgeRequested=true`)).status).toBe(204);
    const again = await call(node.url, 'POST', path, { key, body: setProps({ a: 'b' }) });
    expect(replayed(again)).toBe('true');
    expect(again.status).toBe(200);
    // failed at 6660867: the body is {"metadata-location":…,"metadata":{"table-uuid":…}}.
    expect(checkResponse('POST', path, again.status, again.text)).toEqual([]);
    expect(again.text).toBe(first.text);
  });

  test("commit whose own metadata file a later commit deletes (delete-after-commit): the replay is its own answer, not another commit's", async () => {
    await call(node.url, 'POST', '/v1/namespaces/n/tables', {
      body: {
        name: 'expiring',
        schema,
        properties: {
          'write.metadata.delete-after-commit.enabled': 'true',
          'write.metadata.previous-versions-max': '1',
        },
      },
    });
    const key = newKey();
    const path = '/v1/namespaces/n/tables/expiring';
    const first = await call(node.url, 'POST', path, { key, body: setProps({ a: 'b' }) });
    expect(first.status, first.text).toBe(200);
    for (const later of ['c', 'd']) await call(node.url, 'POST', path, { body: setProps({ [later]: 'x' }) });
    const again = await call(node.url, 'POST', path, { key, body: setProps({ a: 'b' }) });
    expect(replayed(again)).toBe('true');
    // The spec allows "a newer state", the README says "A commit replays the answer it gave".
    expect(again.json()['metadata-location']).toBe(first.json()['metadata-location']); // failed at 6660867
    expect(again.text).toBe(first.text);
  });

  test('register, then drop (files kept): the replay is the metadata that was answered, not the raw file', async () => {
    const file = foreignTableFile('dropped', '9c12d441-03fe-4693-9a96-00000000e004');
    const key = newKey();
    const request = { name: 'dropped', 'metadata-location': file };
    const first = await call(node.url, 'POST', '/v1/namespaces/n/register', { key, body: request });
    expect(first.status, first.text).toBe(200);
    expect((await call(node.url, 'DELETE', '/v1/namespaces/n/tables/dropped')).status).toBe(204);
    const again = await call(node.url, 'POST', '/v1/namespaces/n/register', { key, body: request });
    expect(replayed(again)).toBe('true');
    expect(again.json()).toEqual(first.json());
    expect(again.text).toBe(first.text); // failed at 6660867: member order of the file
  });

  test('register-view, then drop: the replay is the answer, not the raw file (`properties` moved, or missing)', async () => {
    const created = await call(node.url, 'POST', '/v1/namespaces/n/views', {
      body: {
        ...view,
        name: 'source',
        'view-version': { ...view['view-version'], 'default-namespace': ['n'] },
      },
    });
    expect(created.status, created.text).toBe(200);
    const { properties: _dropped, ...rest } = created.json().metadata;
    const file = join(node.warehouse, 'foreign-view.metadata.json');
    // Another tool's file, without the optional `properties`, and another UUID.
    writeFileSync(
      file,
      JSON.stringify({ ...rest, 'view-uuid': '0190b7e2-5a5d-7c3e-8f00-00000000e005' }, null, 2),
    );
    const key = newKey();
    const request = { name: 'rv', 'metadata-location': file };
    const path = '/v1/namespaces/n/register-view';
    const first = await call(node.url, 'POST', path, { key, body: request });
    expect(first.status, first.text).toBe(200);
    expect((await call(node.url, 'DELETE', '/v1/namespaces/n/views/rv')).status).toBe(204);
    const again = await call(node.url, 'POST', path, { key, body: request });
    expect(replayed(again)).toBe('true');
    expect(again.text).toBe(first.text); // failed at 6660867: no "properties":{} any more
  });
});

describe('a commit replay rebuilt by UUID', () => {
  test("two tables with one UUID (one file registered twice, or copied): a commit's replay never answers the other table", async () => {
    const uuid = '9c12d441-03fe-4693-9a96-00000000e0ff';
    const props = {
      'write.metadata.delete-after-commit.enabled': 'true',
      'write.metadata.previous-versions-max': '1',
    };
    const fileFor = (name: string) => {
      const file = join(node.warehouse, `${name}-same-uuid.metadata.json`);
      const location = pathToFileURL(join(node.warehouse, 'n', `${name}-same-uuid`)).href;
      writeFileSync(file, JSON.stringify(tableMetadata(location, { 'table-uuid': uuid, properties: props })));
      return file;
    };
    // The copy first, then the table the client commits to.
    for (const name of ['copy', 'orig'])
      expect(
        (
          await call(node.url, 'POST', '/v1/namespaces/n/register', {
            body: { name, 'metadata-location': fileFor(name) },
          })
        ).status,
      ).toBe(200);
    const key = newKey();
    const path = '/v1/namespaces/n/tables/orig';
    const first = await call(node.url, 'POST', path, { key, body: setProps({ a: 'b' }) });
    expect(first.status, first.text).toBe(200);
    // Later commits let go of the commit's own file (deleted after commit).
    for (const later of ['c', 'd']) await call(node.url, 'POST', path, { body: setProps({ [later]: 'x' }) });
    const again = await call(node.url, 'POST', path, { key, body: setProps({ a: 'b' }) });
    expect(replayed(again)).toBe('true');
    // failed at 6660867: the replay of a commit to `orig` is table `copy` (its location, its metadata).
    expect(again.json().metadata.location).toBe(first.json().metadata.location);
  });
});

describe('loads send the stored text as it is', () => {
  test('a corrupt metadata column: GET answers a 500, never a 200 whose body is not JSON', async () => {
    await call(node.url, 'POST', '/v1/namespaces/n/tables', { body: { name: 'corrupt', schema } });
    await node.db.run(
      sql`UPDATE catalog_entities SET metadata = ${'{"format-version":2,"truncated'} WHERE name = ${'corrupt'}`,
    );
    const loaded = await call(node.url, 'GET', '/v1/namespaces/n/tables/corrupt');
    expect(loaded.headers.get('content-type')).toBe('application/json; charset=utf-8');
    expect(() => JSON.parse(loaded.text)).not.toThrow(); // failed at 03958b9: invalid JSON sent with a 200
    expect(loaded.status).not.toBe(200);
  });
});
