import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { parseLosslessJson } from '../src/catalog/lossless-json.js';
import { backends } from './support/databases.js';
import { checkResponse } from './support/openapi.js';
import { type Answer, call, type Node, newKey, schema, startNode } from './support/server.js';

// Iceberg's Java client draws snapshot ids from the whole 64-bit range. Every body here is raw JSON text and
// every answer is read as text (or with the catalog's exact parser): JSON.parse would round the digits under test.

const MAX = '9223372036854775807'; // 2^63 - 1
const MIN = '-9223372036854775808'; // -2^63
const JAVA = '5938174936372637279'; // an id the Java client made
const NEAR = '5938174936372637280'; // the same double as JAVA: only exact handling tells them apart
const PAST = '9223372036854775808'; // 2^63, one past int64

const snapshot = (id: string, parent?: string, sequence = 1) =>
  `{"snapshot-id":${id},${parent === undefined ? '' : `"parent-snapshot-id":${parent},`}"sequence-number":${sequence},"timestamp-ms":1700000000000,"manifest-list":"file:/m/snap-${id}.avro","summary":{"operation":"append"}}`;
const addSnapshot = (id: string, parent?: string, sequence?: number) =>
  `{"action":"add-snapshot","snapshot":${snapshot(id, parent, sequence)}}`;
const setRef = (name: string, id: string, type = 'branch') =>
  `{"action":"set-snapshot-ref","ref-name":"${name}","type":"${type}","snapshot-id":${id}}`;
const assertRef = (name: string, id: string) =>
  `{"type":"assert-ref-snapshot-id","ref":"${name}","snapshot-id":${id}}`;
const removeSnapshots = (...ids: string[]) =>
  `{"action":"remove-snapshots","snapshot-ids":[${ids.join(',')}]}`;
const commitOf = (requirements: string[], updates: string[]) =>
  `{"requirements":[${requirements.join(',')}],"updates":[${updates.join(',')}]}`;

// biome-ignore lint/suspicious/noExplicitAny: tests read metadata field by field.
type Json = any;
/** An answer's body read with the catalog's own exact parser: longs past 2^53 are bigints. */
const exact = (answer: Answer): Json => parseLosslessJson(answer.text, { maxDepth: 1024 });
/** `"field":digits` followed by the end of that value: the exact digits, not a prefix of longer ones. */
const field = (name: string, digits: string) => new RegExp(`"${name}":${digits.replace('-', '\\-')}[,}\\]]`);

async function commit(node: Node, table: string, raw: string, key?: string) {
  const path = `/v1/namespaces/longs/tables/${table}`;
  const answer = await call(node.url, 'POST', path, { raw, ...(key === undefined ? {} : { key }) });
  expect(checkResponse('POST', path, answer.status, answer.text)).toEqual([]);
  return answer;
}

/** The Java client's commits on one node: add-snapshot, set-snapshot-ref, assert-ref-snapshot-id, remove-snapshots. */
async function javaClientCommits(node: Node) {
  await call(node.url, 'POST', '/v1/namespaces', { body: { namespace: ['longs'] } });
  expect(
    (await call(node.url, 'POST', '/v1/namespaces/longs/tables', { body: { name: 'java', schema } })).status,
  ).toBe(200);

  const first = await commit(
    node,
    'java',
    commitOf(
      [assertRef('main', 'null')],
      [
        addSnapshot(MAX),
        addSnapshot(JAVA, MAX, 2),
        addSnapshot(NEAR, JAVA, 3),
        addSnapshot('-1', JAVA, 4),
        addSnapshot(MIN, JAVA, 5),
        setRef('main', JAVA),
        setRef('minus-one', '-1', 'tag'),
        setRef('min', MIN, 'tag'),
      ],
    ),
  );
  expect(first.status, first.text).toBe(200);
  expect(first.text).toMatch(field('current-snapshot-id', JAVA));
  expect(first.text).toMatch(field('last-sequence-number', '5'));

  // NEAR is not JAVA, though a double cannot tell them apart.
  const stale = await commit(node, 'java', commitOf([assertRef('main', NEAR)], [setRef('main', MAX)]));
  expect(stale.status, stale.text).toBe(409);
  expect(stale.text).toContain(`branch or tag main is at ${JAVA}, not ${NEAR}`);

  const moved = await commit(node, 'java', commitOf([assertRef('main', JAVA)], [setRef('main', NEAR)]));
  expect(moved.status, moved.text).toBe(200);

  const removed = await commit(
    node,
    'java',
    commitOf([assertRef('main', NEAR)], [removeSnapshots(MAX, JAVA)]),
  );
  expect(removed.status, removed.text).toBe(200);

  const past = await commit(node, 'java', commitOf([], [addSnapshot(PAST)]));
  expect(past.status).toBe(400);
  expect(past.json().error.message).toBe(
    `body/updates/0/snapshot/snapshot-id must be an int64 (from ${MIN} to ${MAX})`,
  );
  const pastAssert = await commit(node, 'java', commitOf([assertRef('main', PAST)], []));
  expect(pastAssert.status).toBe(400);
  expect(pastAssert.json().error.message).toMatch(/^body\/requirements\/0\/snapshot-id must be an int64/);

  const loaded = await call(node.url, 'GET', '/v1/namespaces/longs/tables/java');
  expect(loaded.status).toBe(200);
  expect(checkResponse('GET', '/v1/namespaces/longs/tables/java', 200, loaded.text)).toEqual([]);
  // The raw text carries the exact digits.
  expect(loaded.text).toMatch(field('current-snapshot-id', NEAR));
  for (const id of [NEAR, '-1', MIN]) expect(loaded.text).toMatch(field('snapshot-id', id));
  expect(loaded.text).toMatch(new RegExp(`"main":\\{[^}]*"snapshot-id":${NEAR}[,}]`));
  expect(loaded.text).toMatch(new RegExp(`"min":\\{[^}]*"snapshot-id":${MIN}[,}]`));
  // And the structure is what the commits made, compared exactly.
  const metadata = exact(loaded).metadata;
  expect(metadata['current-snapshot-id']).toBe(BigInt(NEAR));
  expect(metadata.snapshots.map((s: Json) => s['snapshot-id'])).toEqual([BigInt(NEAR), -1, BigInt(MIN)]);
  expect(metadata.snapshots[0]['parent-snapshot-id']).toBe(BigInt(JAVA));
  expect(Object.keys(metadata.refs).sort()).toEqual(['main', 'min', 'minus-one']);
  expect(metadata['snapshot-log'].map((e: Json) => e['snapshot-id'])).toEqual([BigInt(JAVA), BigInt(NEAR)]);
  expect(typeof metadata['last-updated-ms']).toBe('number');

  // The metadata file and the SQL row hold the same digits.
  const file = readFileSync(fileURLToPath(exact(loaded)['metadata-location']), 'utf8');
  expect(file).toMatch(field('current-snapshot-id', NEAR));
  expect(file).toMatch(field('snapshot-id', MIN));
  const [row] = await node.db.rows(sql`SELECT metadata FROM catalog_entities WHERE name = ${'java'}`);
  const column = Buffer.isBuffer(row?.metadata) ? row.metadata.toString('utf8') : String(row?.metadata);
  expect(column).toMatch(field('current-snapshot-id', NEAR));
  expect(column).toMatch(field('snapshot-id', MIN));

  // A commit retried with its key replays the exact digits.
  const key = newKey();
  const raw = commitOf([assertRef('main', NEAR)], [addSnapshot(MAX, NEAR, 6), setRef('main', MAX)]);
  const once = await commit(node, 'java', raw, key);
  const again = await commit(node, 'java', raw, key);
  expect(once.status, once.text).toBe(200);
  expect(again.headers.get('idempotent-replayed')).toBe('true');
  expect(again.text).toBe(once.text);
  expect(again.text).toMatch(field('current-snapshot-id', MAX));
}

/** Table metadata as another tool (Iceberg's Java writer) writes it: pretty-printed, longs as plain digits. */
function javaMetadataFile(location: string, current: string) {
  return `{
  "format-version" : 2,
  "table-uuid" : "0b1bb5f2-4e38-4d5b-9c4e-3f2d8c6a1e01",
  "location" : "${location}",
  "last-sequence-number" : ${JAVA},
  "last-updated-ms" : 1700000000000,
  "last-column-id" : 2,
  "current-schema-id" : 0,
  "schemas" : [ ${JSON.stringify(schema)} ],
  "default-spec-id" : 0,
  "partition-specs" : [ { "spec-id" : 0, "fields" : [ ] } ],
  "last-partition-id" : 999,
  "default-sort-order-id" : 0,
  "sort-orders" : [ { "order-id" : 0, "fields" : [ ] } ],
  "properties" : { "owner" : "java" },
  "current-snapshot-id" : ${current},
  "refs" : { "main" : { "snapshot-id" : ${JAVA}, "type" : "branch", "max-ref-age-ms" : ${MAX} } },
  "snapshots" : [ ${snapshot(MAX)}, ${snapshot(JAVA, MAX, 2)} ],
  "statistics" : [ {
    "snapshot-id" : ${JAVA},
    "statistics-path" : "${location}/metadata/stats.puffin",
    "file-size-in-bytes" : 413,
    "file-footer-size-in-bytes" : 42,
    "blob-metadata" : [ { "type" : "apache-datasketches-theta-v1", "snapshot-id" : ${JAVA}, "sequence-number" : 2, "fields" : [ 1 ] } ]
  } ],
  "partition-statistics" : [ { "snapshot-id" : ${JAVA}, "statistics-path" : "${location}/metadata/p.parquet", "file-size-in-bytes" : 43 } ],
  "snapshot-log" : [ { "timestamp-ms" : 1700000000000, "snapshot-id" : ${JAVA} } ],
  "metadata-log" : [ ]
}`;
}

/** Write a metadata file into the node's warehouse; returns its location. */
function placeMetadata(node: Node, name: string, text: string): string {
  const dir = join(node.warehouse, 'longs', name, 'metadata');
  mkdirSync(dir, { recursive: true });
  const path = join(dir, '00001-java.metadata.json');
  writeFileSync(path, text);
  return pathToFileURL(path).href;
}

async function registerJavaMetadata(node: Node) {
  const location = pathToFileURL(join(node.warehouse, 'longs', 'registered')).href;
  const metadataLocation = placeMetadata(node, 'registered', javaMetadataFile(location, JAVA));
  const key = newKey();
  const body = { name: 'registered', 'metadata-location': metadataLocation };
  const registered = await call(node.url, 'POST', '/v1/namespaces/longs/register', { body, key });
  expect(registered.status, registered.text).toBe(200);
  for (const text of [
    registered.text,
    (await call(node.url, 'GET', '/v1/namespaces/longs/tables/registered')).text,
    // A replayed load result is rebuilt from the table as it is now: parsed and written again, exactly.
    (await call(node.url, 'POST', '/v1/namespaces/longs/register', { body, key })).text,
  ]) {
    expect(text).toMatch(field('current-snapshot-id', JAVA));
    expect(text).toMatch(field('last-sequence-number', JAVA));
    expect(text).toMatch(field('max-ref-age-ms', MAX));
    expect(text).toMatch(new RegExp(`"statistics":\\[\\{"snapshot-id":${JAVA},`));
    expect(text).toMatch(new RegExp(`"partition-statistics":\\[\\{"snapshot-id":${JAVA},`));
    expect(exact({ text } as Answer).metadata.snapshots.map((s: Json) => s['snapshot-id'])).toEqual([
      BigInt(MAX),
      BigInt(JAVA),
    ]);
  }

  // Removing a snapshot takes its statistics with it, matched exactly (NEAR names no snapshot here).
  const kept = await commit(node, 'registered', commitOf([], [removeSnapshots(NEAR)]));
  expect(exact(kept).metadata.statistics).toHaveLength(1);
  const gone = await commit(node, 'registered', commitOf([], [removeSnapshots(JAVA)]));
  expect(gone.status, gone.text).toBe(200);
  const metadata = exact(gone).metadata;
  expect(metadata.statistics).toEqual([]);
  expect(metadata['partition-statistics']).toEqual([]);
  expect(metadata['current-snapshot-id']).toBeUndefined();
  expect(metadata.snapshots.map((s: Json) => s['snapshot-id'])).toEqual([BigInt(MAX)]);
}

describe('64-bit ids on SQLite', () => {
  let node: Node;
  beforeAll(async () => {
    node = await startNode('sqlite::memory:');
  });
  afterAll(async () => node.close());

  test('a Java client commits with snapshot ids past 2^53 and reads back the exact digits', () =>
    javaClientCommits(node));

  test('register of a metadata file with 64-bit ids round-trips exactly (answer, load, replay)', () =>
    registerJavaMetadata(node));

  test("register of Java's -1 (no current snapshot) keeps -1; an id past int64 in a file is a 400 naming it", async () => {
    const location = pathToFileURL(join(node.warehouse, 'longs', 'none')).href;
    const none = javaMetadataFile(location, '-1').replace(/"snapshots" : \[.*\],\n/, '"snapshots" : [ ],\n');
    const ok = await call(node.url, 'POST', '/v1/namespaces/longs/register', {
      body: { name: 'none', 'metadata-location': placeMetadata(node, 'none', none) },
    });
    expect(ok.status, ok.text).toBe(200);
    expect(ok.text).toMatch(field('current-snapshot-id', '-1'));

    const pastLocation = pathToFileURL(join(node.warehouse, 'longs', 'past')).href;
    const past = await call(node.url, 'POST', '/v1/namespaces/longs/register', {
      body: {
        name: 'past',
        'metadata-location': placeMetadata(node, 'past', javaMetadataFile(pastLocation, PAST)),
      },
    });
    expect(past.status).toBe(400);
    expect(past.json().error.message).toBe(
      `metadata-location does not hold Iceberg table metadata: /current-snapshot-id must be an int64 (from ${MIN} to ${MAX})`,
    );
  });
});

describe('64-bit ids: what a client may write, and what it may not', () => {
  let node: Node;
  beforeAll(async () => {
    node = await startNode('sqlite::memory:');
    await call(node.url, 'POST', '/v1/namespaces', { body: { namespace: ['longs'] } });
  });
  afterAll(async () => node.close());

  const createTable = async (name: string, properties: Record<string, string> = {}) =>
    expect(
      (await call(node.url, 'POST', '/v1/namespaces/longs/tables', { body: { name, schema, properties } }))
        .status,
    ).toBe(200);

  test('an id is the integer its text denotes: 1e18, 5.938174936372637281e18, 1.0 and -0 are exact', async () => {
    await createTable('forms');
    const added = await commit(
      node,
      'forms',
      commitOf(
        [],
        [addSnapshot('1e18'), addSnapshot('5.938174936372637281e18'), addSnapshot('1.0'), addSnapshot('-0')],
      ),
    );
    expect(added.status, added.text).toBe(200);
    for (const id of ['1000000000000000000', '5938174936372637281', '1', '0'])
      expect(added.text).toMatch(field('snapshot-id', id));
    // The same id written another way is the same id.
    const again = await commit(node, 'forms', commitOf([], [addSnapshot('59381749363726372810e-1')]));
    expect(again.status).toBe(400);
    expect(again.json().error.message).toBe('snapshot 5938174936372637281 already exists');
    const main = await commit(node, 'forms', commitOf([], [setRef('main', '5938174936372637281e0')]));
    expect(main.text).toMatch(field('current-snapshot-id', '5938174936372637281'));
  });

  test('a fraction a double rounds to an integer, or a number beyond a double, is a 400 naming the field', async () => {
    for (const [raw, message] of [
      ['5938174936372637279.5', 'body/updates/0/snapshot/snapshot-id must be integer'],
      ['1.5', 'body/updates/0/snapshot/snapshot-id must be integer'],
      ['1e400', 'body/updates/0/snapshot/snapshot-id is a number beyond the range of any Iceberg type'],
      ['-1e400', 'body/updates/0/snapshot/snapshot-id is a number beyond the range of any Iceberg type'],
    ] as const) {
      const answer = await commit(node, 'forms', commitOf([], [addSnapshot(raw)]));
      expect(answer.status, raw).toBe(400);
      expect(answer.json().error.message).toBe(message);
    }
  });

  test('a long where a string belongs (properties, summary) is a 400, not quietly stored', async () => {
    const namespace = await call(node.url, 'POST', '/v1/namespaces', {
      raw: `{"namespace":["props"],"properties":{"k":${JAVA}}}`,
    });
    expect(namespace.status).toBe(400);
    expect(namespace.json().error.message).toBe('body/properties/k must be string');
    const set = await commit(
      node,
      'forms',
      commitOf([], [`{"action":"set-properties","updates":{"k":${JAVA}}}`]),
    );
    expect(set.status).toBe(400);
    expect(set.json().error.message).toBe('body/updates/0/updates/k must be string');
    const summary = await commit(
      node,
      'forms',
      commitOf(
        [],
        [addSnapshot('77').replace('"operation":"append"', `"operation":"append","added-files":${JAVA}`)],
      ),
    );
    expect(summary.status).toBe(400);
  });

  test('remove-snapshots with 45 000 ids in one body: exact membership, in time', async () => {
    const ids = Array.from({ length: 45_000 }, (_, i) => (BigInt(JAVA) + BigInt(i) * 7n).toString());
    const raw = commitOf([], [removeSnapshots('1000000000000000000', ...ids)]);
    expect(raw.length).toBeLessThan(1024 * 1024);
    const started = performance.now();
    const answer = await commit(node, 'forms', raw);
    expect(answer.status, answer.text).toBe(200);
    expect(performance.now() - started).toBeLessThan(5_000);
    const remaining = exact(answer).metadata.snapshots.map((s: Json) => s['snapshot-id']);
    // 5938174936372637281 is not in the list (JAVA + 2), though doubles would say it is.
    expect(remaining).toEqual([5938174936372637281n, 1, 0]);
  });

  test('no id travels in a path or query; an integer query parameter past int32 is a 400', async () => {
    for (const size of ['2147483648', '9223372036854775807', '1e18']) {
      const answer = await call(node.url, 'GET', `/v1/namespaces?pageSize=${size}`);
      expect(answer.status, size).toBe(400);
      expect(answer.json().error.message).toMatch(/^querystring\/pageSize must be/);
    }
  });

  test('deep or out-of-range JSON in a registered file is a 400, never a crash of the recursive parser', async () => {
    const register = (name: string, text: string) =>
      call(node.url, 'POST', '/v1/namespaces/longs/register', {
        body: { name, 'metadata-location': placeMetadata(node, name, text) },
      });
    const deep = await register('deep', `{"a":${'['.repeat(200_000)}${']'.repeat(200_000)}}`);
    expect(deep.status).toBe(400);
    expect(deep.json().error.message).toBe(
      'metadata-location does not hold Iceberg metadata: JSON that nests deeper than 1024 levels',
    );
    const nested = await register(
      'nested',
      `{"format-version":2,"a":${'['.repeat(1000)}${']'.repeat(1000)}}`,
    );
    expect(nested.status).toBe(400);
    const huge = await register('huge', '{"format-version":2,"table-uuid":"u","last-sequence-number":1e400}');
    expect(huge.status).toBe(400);
    expect(huge.json().error.message).toBe(
      'metadata-location does not hold Iceberg metadata: JSON that holds a number beyond the range of a double',
    );
    expect((await call(node.url, 'GET', '/v1/config')).status).toBe(200);
  });

  test('sequence numbers and v3 row ids are counted exactly, and refused past int64', async () => {
    await createTable('lineage', { 'format-version': '3' });
    const withRows = (id: string, sequence: string, first: string, added: string) =>
      `{"action":"add-snapshot","snapshot":${snapshot(id).replace(
        '"sequence-number":1',
        `"sequence-number":${sequence},"first-row-id":${first},"added-rows":${added}`,
      )}}`;
    const first = await commit(
      node,
      'lineage',
      commitOf([], [withRows('1', '9223372036854775806', '0', '9007199254740993')]),
    );
    expect(first.status, first.text).toBe(200);
    expect(first.text).toMatch(field('next-row-id', '9007199254740993'));
    expect(first.text).toMatch(field('last-sequence-number', '9223372036854775806'));
    // Without a sequence number, the next one is counted: up to int64's last, and no further.
    const counted = await commit(
      node,
      'lineage',
      commitOf([], [addSnapshot('2').replace('"sequence-number":1,', '')]),
    );
    expect(counted.text).toMatch(field('last-sequence-number', MAX));
    const past = await commit(
      node,
      'lineage',
      commitOf([], [addSnapshot('3').replace('"sequence-number":1,', '')]),
    );
    expect(past.status).toBe(400);
    expect(past.json().error.message).toBe('last-sequence-number would pass the largest 64-bit integer');
    const behind = await commit(node, 'lineage', commitOf([], [withRows('4', '5', '9007199254740992', '1')]));
    expect(behind.status).toBe(400);
    expect(behind.json().error.message).toBe(
      "snapshot first-row-id 9007199254740992 is behind the table's next-row-id 9007199254740993",
    );
    const overflow = await commit(
      node,
      'lineage',
      commitOf([], [withRows('5', '5', '9007199254740993', MAX)]),
    );
    expect(overflow.status).toBe(400);
    expect(overflow.json().error.message).toBe('next-row-id would pass the largest 64-bit integer');
    const loaded = await call(node.url, 'GET', '/v1/namespaces/longs/tables/lineage');
    expect(loaded.text).toMatch(field('next-row-id', '9007199254740993'));
    expect(typeof exact(loaded).metadata['last-updated-ms']).toBe('number');
  });
});

for (const backend of backends) {
  describe.runIf(await backend.up())(`64-bit ids on ${backend.name}`, () => {
    test('Java client commits, register and replay keep the exact digits through the database', async () => {
      const database = await backend.fresh();
      const node = await startNode(database.url);
      try {
        await javaClientCommits(node);
        await registerJavaMetadata(node);
      } finally {
        await node.close();
        await database.drop();
      }
    });
  });
}
