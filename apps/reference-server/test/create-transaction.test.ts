import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { everyDatabase, type FreshDatabase } from './support/databases.js';
import { gate } from './support/gate.js';
import { view } from './support/hostile.js';
import { call, idempotencyRecords, type Node, newKey, schema, startNode } from './support/server.js';

// Iceberg's create transaction (Java's RESTSessionCatalog createTransaction / replaceTransaction, which Spark's
// CTAS uses): a stage-create answers metadata and commits nothing; the table is made later by a commit whose
// requirement is `assert-create` and whose updates build it from nothing (UpdateRequirements.forCreateTable).
// Before, that commit was a 404 NoSuchTableException: the catalog looked for the table it was asked to create.

type Json = Record<string, unknown>;
type Change = { requirements: unknown[]; updates: unknown[] };

/** Every `.metadata.json` file under `directory`, sorted. */
function metadataFiles(directory: string): string[] {
  if (!existsSync(directory)) return [];
  return readdirSync(directory, { recursive: true, encoding: 'utf8' })
    .filter((file) => file.endsWith('.metadata.json'))
    .map((file) => join(directory, file))
    .sort();
}

/** A table's location (a `file:` URL) as a local directory. */
const directoryOf = (location: string) => fileURLToPath(location);

/** What Iceberg's Java client sends to commit a staged create: its requirement and its updates, in its order. */
function createChange(staged: Json, changes: { updates?: unknown[]; extra?: unknown[] } = {}): Change {
  const schemaOf = (staged.schemas as Json[])[0] as Json;
  return {
    requirements: [{ type: 'assert-create' }],
    updates: changes.updates ?? [
      { action: 'assign-uuid', uuid: staged['table-uuid'] },
      { action: 'upgrade-format-version', 'format-version': staged['format-version'] },
      { action: 'add-schema', schema: schemaOf, 'last-column-id': staged['last-column-id'] },
      { action: 'set-current-schema', 'schema-id': -1 },
      { action: 'add-spec', spec: (staged['partition-specs'] as Json[])[0] },
      { action: 'set-default-spec', 'spec-id': -1 },
      { action: 'add-sort-order', 'sort-order': (staged['sort-orders'] as Json[])[0] },
      { action: 'set-default-sort-order', 'sort-order-id': -1 },
      { action: 'set-location', location: staged.location },
      { action: 'set-properties', updates: staged.properties },
      ...(changes.extra ?? []),
    ],
  };
}

/** The two ways a table's commit comes: alone, or as one change of `transactions/commit`. */
const forms = [
  {
    form: 'single-table commit',
    id: 's',
    ok: 200,
    send: (url: string, namespace: string, name: string, change: Change, key?: string) =>
      call(url, 'POST', `/v1/namespaces/${namespace}/tables/${name}`, {
        body: change,
        ...(key === undefined ? {} : { key }),
      }),
  },
  {
    form: 'transactions/commit',
    id: 'm',
    ok: 204,
    send: (url: string, namespace: string, name: string, change: Change, key?: string) =>
      call(url, 'POST', '/v1/transactions/commit', {
        body: { 'table-changes': [{ identifier: { namespace: [namespace], name }, ...change }] },
        ...(key === undefined ? {} : { key }),
      }),
  },
];

/** Stage a create of `name` in namespace `n` (nothing is committed) and answer its metadata. */
async function stage(url: string, name: string, request: Json = {}): Promise<Json> {
  const staged = await call(url, 'POST', '/v1/namespaces/n/tables', {
    body: { name, schema, 'stage-create': true, ...request },
  });
  expect(staged.status, staged.text).toBe(200);
  expect(staged.json()['metadata-location']).toBeUndefined();
  return staged.json().metadata;
}

describe.each(everyDatabase)('on $name', (backend) => {
  let database: FreshDatabase | undefined;
  let node: Node | undefined;
  beforeAll(async () => {
    if (!(await backend.up())) return;
    database = await backend.fresh();
    node = await startNode(database.url);
    await call(node.url, 'POST', '/v1/namespaces', { body: { namespace: ['n'] } });
  });
  afterAll(async () => {
    await node?.close();
    await database?.drop();
  });

  const load = (name: string) => call((node as Node).url, 'GET', `/v1/namespaces/n/tables/${name}`);

  describe.each(forms)('as a $form', ({ id, ok, send }) => {
    test('a staged create committed with assert-create: the table, as the staged metadata said', async (context) => {
      if (node === undefined) return context.skip();
      const name = `${id}_created`;
      const staged = await stage(node.url, name, { properties: { owner: 'spark' } });
      expect((await load(name)).status).toBe(404);
      const created = await send(node.url, 'n', name, createChange(staged));
      expect(created.status, created.text).toBe(ok);

      const loaded = await load(name);
      expect(loaded.status, loaded.text).toBe(200);
      const { metadata, 'metadata-location': metadataLocation } = loaded.json();
      if (ok === 200) {
        // A CommitTableResponse: the new metadata and its file, no config.
        expect(created.json()).toEqual({ 'metadata-location': metadataLocation, metadata });
      }
      // Version 0, written under the staged location.
      expect(metadataLocation).toMatch(/\/metadata\/00000-[0-9a-f-]{36}\.metadata\.json$/);
      expect(metadataLocation.startsWith(`${staged.location}/metadata/`)).toBe(true);
      expect(metadata).toMatchObject({
        'format-version': 2,
        'table-uuid': staged['table-uuid'],
        location: staged.location,
        'last-column-id': 2,
        schemas: [{ ...schema, 'schema-id': 0 }],
        'current-schema-id': 0,
        'partition-specs': [{ 'spec-id': 0, fields: [] }],
        'default-spec-id': 0,
        'last-partition-id': 999,
        'sort-orders': [{ 'order-id': 0, fields: [] }],
        'default-sort-order-id': 0,
        properties: { owner: 'spark' },
        snapshots: [],
        'metadata-log': [],
      });
      // The answer is the file.
      expect(JSON.parse(readFileSync(fileURLToPath(metadataLocation), 'utf8'))).toEqual(metadata);
      expect(metadataFiles(directoryOf(staged.location as string))).toEqual([
        fileURLToPath(metadataLocation),
      ]);
      const listed = await call(node.url, 'GET', '/v1/namespaces/n/tables');
      expect(listed.json().identifiers).toContainEqual({ namespace: ['n'], name });

      // A table like any other: the next commit is version 1, and the log remembers version 0.
      const next = await call(node.url, 'POST', `/v1/namespaces/n/tables/${name}`, {
        body: {
          requirements: [{ type: 'assert-table-uuid', uuid: staged['table-uuid'] }],
          updates: [{ action: 'set-properties', updates: { next: 'yes' } }],
        },
      });
      expect(next.status, next.text).toBe(200);
      expect(next.json()['metadata-location']).toMatch(/\/00001-[^/]+\.metadata\.json$/);
      expect(next.json().metadata['metadata-log']).toEqual([
        { 'metadata-file': metadataLocation, 'timestamp-ms': metadata['last-updated-ms'] },
      ]);
    });

    test('keyed, and retried with its key: the answer replayed, one table, one file', async (context) => {
      if (node === undefined) return context.skip();
      const name = `${id}_keyed`;
      const staged = await stage(node.url, name);
      const key = newKey();
      const first = await send(node.url, 'n', name, createChange(staged), key);
      expect(first.status, first.text).toBe(ok);
      const { 'metadata-location': metadataLocation } = (await load(name)).json();
      for (let i = 0; i < 2; i++) {
        const retry = await send(node.url, 'n', name, createChange(staged), key);
        expect(retry.status, retry.text).toBe(ok);
        expect(retry.headers.get('idempotent-replayed')).toBe('true');
        expect(retry.text).toBe(first.text);
      }
      expect(await idempotencyRecords(node, key)).toBe(1);
      expect((await load(name)).json()['metadata-location']).toBe(metadataLocation);
      expect(metadataFiles(directoryOf(staged.location as string))).toEqual([
        fileURLToPath(metadataLocation),
      ]);
      // Without its key the same commit meets the table it made.
      const again = await send(node.url, 'n', name, createChange(staged));
      expect(again.status, again.text).toBe(409);
      expect(again.json().error.type).toBe('CommitFailedException');
    });

    test('the table exists: 409 CommitFailedException, nothing written', async (context) => {
      if (node === undefined) return context.skip();
      const name = `${id}_exists`;
      const existing = await call(node.url, 'POST', '/v1/namespaces/n/tables', { body: { name, schema } });
      expect(existing.status, existing.text).toBe(200);
      const staged = await stage(node.url, name);
      const before = metadataFiles(node.warehouse);
      const refused = await send(node.url, 'n', name, createChange(staged));
      expect(refused.status, refused.text).toBe(409);
      expect(refused.json().error).toMatchObject({
        type: 'CommitFailedException',
        message: 'Requirement failed: table already exists',
      });
      expect(metadataFiles(node.warehouse)).toEqual(before);
      expect((await load(name)).json()['metadata-location']).toBe(existing.json()['metadata-location']);
    });

    test('the namespace does not exist: 404 NoSuchNamespaceException, nothing written', async (context) => {
      if (node === undefined) return context.skip();
      const name = `${id}_nowhere`;
      const staged = await stage(node.url, name);
      const before = metadataFiles(node.warehouse);
      const refused = await send(node.url, 'missing', name, createChange(staged));
      expect(refused.status, refused.text).toBe(404);
      expect(refused.json().error.type).toBe('NoSuchNamespaceException');
      expect(metadataFiles(node.warehouse)).toEqual(before);
    });

    test('a view has the name (tables and views share names): 409, nothing written', async (context) => {
      if (node === undefined) return context.skip();
      const name = `${id}_view`;
      const made = await call(node.url, 'POST', '/v1/namespaces/n/views', {
        body: { ...view, name, 'view-version': { ...view['view-version'], 'default-namespace': ['n'] } },
      });
      expect(made.status, made.text).toBe(200);
      const staged = await stage(node.url, name);
      const before = metadataFiles(node.warehouse);
      const refused = await send(node.url, 'n', name, createChange(staged));
      expect(refused.status, refused.text).toBe(409);
      expect(refused.json().error.type).toBe('AlreadyExistsException');
      expect(metadataFiles(node.warehouse)).toEqual(before);
      const still = await call(node.url, 'GET', `/v1/namespaces/n/views/${name}`);
      expect(still.json()['metadata-location']).toBe(made.json()['metadata-location']);
    });

    /** Updates that cannot make a table, each with what its 400 says. */
    const refusedUpdates: [string, (staged: Json) => Change, RegExp][] = [
      [
        'without assign-uuid',
        (staged) => ({ ...createChange(staged), updates: createChange(staged).updates.slice(1) }),
        /missing: table-uuid \(assign-uuid\)$/,
      ],
      [
        'without set-location',
        (staged) => {
          const change = createChange(staged);
          return { ...change, updates: change.updates.filter((u) => (u as Json).action !== 'set-location') };
        },
        /missing: location \(set-location\)$/,
      ],
      [
        'without a partition spec and a sort order',
        (staged) => {
          const change = createChange(staged);
          const drop = ['add-spec', 'set-default-spec', 'add-sort-order', 'set-default-sort-order'];
          return {
            ...change,
            updates: change.updates.filter((u) => !drop.includes((u as Json).action as string)),
          };
        },
        /missing: default partition spec \(add-spec, set-default-spec\), default sort order/,
      ],
      [
        'assign-uuid alone',
        (staged) => ({ ...createChange(staged), updates: createChange(staged).updates.slice(0, 1) }),
        /missing: location \(set-location\), current schema .*, default partition spec .*, default sort order/,
      ],
      [
        'a spec added before there is a current schema to bind it to',
        (staged) => {
          const [uuid, version, , , addSpec, ...rest] = createChange(staged).updates;
          return { ...createChange(staged), updates: [uuid, version, addSpec, ...rest] };
        },
        /no current schema/,
      ],
      [
        'set-current-schema -1 without add-schema',
        (staged) => {
          const change = createChange(staged);
          return { ...change, updates: change.updates.filter((u) => (u as Json).action !== 'add-schema') };
        },
        /set-current-schema -1 without add-schema/,
      ],
      [
        'a partition field whose source is no column',
        (staged) =>
          createChange(staged, {
            extra: [
              {
                action: 'add-spec',
                spec: { fields: [{ 'source-id': 99, transform: 'identity', name: 'p' }] },
              },
            ],
          }),
        /source-id 99 is no field/,
      ],
      [
        'assign-uuid of something that is no UUID',
        (staged) => {
          const change = createChange(staged);
          return {
            ...change,
            updates: [{ action: 'assign-uuid', uuid: 'x'.repeat(100) }, ...change.updates.slice(1)],
          };
        },
        /assign-uuid must name a UUID/,
      ],
      [
        'a second assign-uuid of another uuid',
        (staged) =>
          createChange(staged, {
            extra: [{ action: 'assign-uuid', uuid: '9c12d441-03fe-4693-9a96-a0705ddf69c1' }],
          }),
        /Cannot reassign uuid/,
      ],
      [
        'format version 4',
        (staged) => {
          const change = createChange(staged);
          return {
            ...change,
            updates: change.updates.map((u) =>
              (u as Json).action === 'upgrade-format-version' ? { ...(u as Json), 'format-version': 4 } : u,
            ),
          };
        },
        /format-version 4/,
      ],
      [
        'assert-create with another requirement beside it',
        (staged) => ({
          ...createChange(staged),
          requirements: [
            { type: 'assert-create' },
            { type: 'assert-current-schema-id', 'current-schema-id': 0 },
          ],
        }),
        /assert-create .* takes no other requirement/,
      ],
    ];

    test.for(refusedUpdates)('%s: 400, nothing written', async ([label, change, message], context) => {
      if (node === undefined) return context.skip();
      const name = `${id}_refused_${refusedUpdates.findIndex(([l]) => l === label)}`;
      const staged = await stage(node.url, name);
      const before = metadataFiles(node.warehouse);
      const refused = await send(node.url, 'n', name, change(staged));
      expect(refused.status, refused.text).toBe(400);
      expect(refused.json().error.type).toBe('BadRequestException');
      expect(refused.json().error.message).toMatch(message);
      expect(metadataFiles(node.warehouse)).toEqual(before);
      expect((await load(name)).status).toBe(404);
    });

    test('a location outside the warehouse, or one it cannot hold: refused, nothing written', async (context) => {
      if (node === undefined) return context.skip();
      const name = `${id}_located`;
      const staged = await stage(node.url, name);
      const outside = mkdtempSync(join(tmpdir(), 'idem-outside-'));
      const link = join(node.warehouse, `${id}-link`);
      symlinkSync(outside, link);
      try {
        const locations: [string, number][] = [
          [pathToFileURL(join(outside, 't')).href, 403],
          [join(outside, 't'), 403],
          [pathToFileURL(join(link, 't')).href, 403],
          [pathToFileURL(node.warehouse).href, 403],
          ['s3://bucket/t', 400],
          // Past the 1920 bytes a table's location may name (limits.ts), in directories of 200 bytes.
          [
            pathToFileURL(join(node.warehouse, ...Array.from({ length: 10 }, () => 'd'.repeat(200)))).href,
            400,
          ],
        ];
        const before = metadataFiles(node.warehouse);
        for (const [location, status] of locations) {
          const change = createChange(staged);
          const updates = change.updates.map((u) =>
            (u as Json).action === 'set-location' ? { action: 'set-location', location } : u,
          );
          const refused = await send(node.url, 'n', name, { ...change, updates });
          expect(refused.status, `${location}: ${refused.text}`).toBe(status);
          expect(refused.json().error.type).toBe(
            status === 403 ? 'ForbiddenException' : 'BadRequestException',
          );
        }
        expect(readdirSync(outside)).toEqual([]);
        expect(metadataFiles(node.warehouse)).toEqual(before);
        expect((await load(name)).status).toBe(404);
      } finally {
        rmSync(link, { force: true });
        rmSync(outside, { recursive: true, force: true });
      }
    });

    test('the uuid of a table the catalog has: 409, nothing written', async (context) => {
      if (node === undefined) return context.skip();
      const other = await call(node.url, 'POST', '/v1/namespaces/n/tables', {
        body: { name: `${id}_uuid_owner`, schema },
      });
      const name = `${id}_uuid_taken`;
      const staged = await stage(node.url, name);
      const change = createChange({ ...staged, 'table-uuid': other.json().metadata['table-uuid'] });
      const before = metadataFiles(node.warehouse);
      const refused = await send(node.url, 'n', name, change);
      expect(refused.status, refused.text).toBe(409);
      expect(refused.json().error.type).toBe('CommitFailedException');
      expect(metadataFiles(node.warehouse)).toEqual(before);
      expect((await load(name)).status).toBe(404);
    });

    test('with the data the transaction wrote (CTAS: add-snapshot, set-snapshot-ref main)', async (context) => {
      if (node === undefined) return context.skip();
      const name = `${id}_ctas`;
      const staged = await stage(node.url, name);
      // A snapshot id past 2^53, as Java's are: sent as raw JSON digits, in place of a placeholder.
      const snapshotId = '3051729675574597004';
      const snapshot = {
        'snapshot-id': 'ID',
        'sequence-number': 1,
        'timestamp-ms': 1,
        'manifest-list': `${staged.location}/metadata/snap-1.avro`,
        summary: { operation: 'append' },
        'schema-id': 0,
      };
      const change = createChange(staged, {
        extra: [
          { action: 'add-snapshot', snapshot },
          { action: 'set-snapshot-ref', 'ref-name': 'main', type: 'branch', 'snapshot-id': 'ID' },
        ],
      });
      const body = (value: unknown) => JSON.stringify(value).replaceAll('"ID"', snapshotId);
      const answer =
        id === 's'
          ? await call(node.url, 'POST', `/v1/namespaces/n/tables/${name}`, { raw: body(change) })
          : await call(node.url, 'POST', '/v1/transactions/commit', {
              raw: body({ 'table-changes': [{ identifier: { namespace: ['n'], name }, ...change }] }),
            });
      expect(answer.status, answer.text).toBe(ok);
      const loaded = await load(name);
      expect(loaded.text).toContain(`"current-snapshot-id":${snapshotId}`);
      expect(loaded.json().metadata['last-sequence-number']).toBe(1);
      expect(loaded.json().metadata.refs.main.type).toBe('branch');
    });

    test('format versions 1 and 3, a partition spec and a sort order: ids as Iceberg assigns them', async (context) => {
      if (node === undefined) return context.skip();
      for (const version of [1, 3]) {
        const name = `${id}_v${version}`;
        const staged = await stage(node.url, name, {
          'partition-spec': { 'spec-id': 0, fields: [{ 'source-id': 1, transform: 'bucket[4]', name: 'b' }] },
          'write-order': {
            'order-id': 1,
            fields: [
              { 'source-id': 2, transform: 'identity', direction: 'asc', 'null-order': 'nulls-first' },
            ],
          },
          properties: { 'format-version': String(version) },
        });
        const created = await send(node.url, 'n', name, createChange(staged));
        expect(created.status, created.text).toBe(ok);
        const { metadata } = (await load(name)).json();
        expect(metadata['format-version']).toBe(version);
        expect(metadata['partition-specs']).toEqual([
          { 'spec-id': 0, fields: [{ 'source-id': 1, transform: 'bucket[4]', name: 'b', 'field-id': 1000 }] },
        ]);
        expect(metadata['last-partition-id']).toBe(1000);
        // 0 is the unsorted order's; a sorted one starts at 1.
        expect(metadata['sort-orders'].map((o: Json) => o['order-id'])).toEqual([1]);
        expect(metadata['default-sort-order-id']).toBe(1);
        if (version === 1) {
          expect(metadata.schema).toEqual({ ...schema, 'schema-id': 0 });
          expect(metadata['partition-spec']).toEqual(metadata['partition-specs'][0].fields);
        } else expect(metadata['next-row-id']).toBe(0);
      }
    });
  });

  describe('with other table changes in one transactions/commit', () => {
    const commitAll = (changes: unknown[]) =>
      call((node as Node).url, 'POST', '/v1/transactions/commit', { body: { 'table-changes': changes } });
    const withId = (name: string, change: Change) => ({ identifier: { namespace: ['n'], name }, ...change });

    test('two creates and a change to a table that exists: all land', async (context) => {
      if (node === undefined) return context.skip();
      await call(node.url, 'POST', '/v1/namespaces/n/tables', { body: { name: 'tx_old', schema } });
      const a = await stage(node.url, 'tx_new_a');
      const b = await stage(node.url, 'tx_new_b');
      const answer = await commitAll([
        withId('tx_new_b', createChange(b)),
        withId('tx_old', {
          requirements: [],
          updates: [{ action: 'set-properties', updates: { tx: 'yes' } }],
        }),
        withId('tx_new_a', createChange(a)),
      ]);
      expect(answer.status, answer.text).toBe(204);
      expect((await load('tx_new_a')).json().metadata['table-uuid']).toBe(a['table-uuid']);
      expect((await load('tx_new_b')).json().metadata['table-uuid']).toBe(b['table-uuid']);
      expect((await load('tx_old')).json().metadata.properties.tx).toBe('yes');
    });

    test('a create beside a change whose requirement fails: neither lands, no file written', async (context) => {
      if (node === undefined) return context.skip();
      await call(node.url, 'POST', '/v1/namespaces/n/tables', { body: { name: 'tx_guarded', schema } });
      const staged = await stage(node.url, 'tx_lost');
      const before = metadataFiles(node.warehouse);
      const answer = await commitAll([
        withId('tx_lost', createChange(staged)),
        withId('tx_guarded', {
          requirements: [{ type: 'assert-current-schema-id', 'current-schema-id': 7 }],
          updates: [{ action: 'set-properties', updates: { tx: 'yes' } }],
        }),
      ]);
      expect(answer.status, answer.text).toBe(409);
      expect(answer.json().error.type).toBe('CommitFailedException');
      expect((await load('tx_lost')).status).toBe(404);
      expect((await load('tx_guarded')).json().metadata.properties.tx).toBeUndefined();
      expect(metadataFiles(node.warehouse)).toEqual(before);
    });

    test('two creates of one uuid: 400, nothing written', async (context) => {
      if (node === undefined) return context.skip();
      const staged = await stage(node.url, 'tx_twin_a');
      const before = metadataFiles(node.warehouse);
      const answer = await commitAll([
        withId('tx_twin_a', createChange(staged)),
        withId('tx_twin_b', createChange(staged)),
      ]);
      expect(answer.status, answer.text).toBe(400);
      expect(metadataFiles(node.warehouse)).toEqual(before);
      expect((await load('tx_twin_a')).status).toBe(404);
    });
  });
});

/** Where concurrent creates run: SQLite in memory (one node), and two nodes on each server database. */
describe.each(everyDatabase)('concurrent creates of one name on $name', (backend) => {
  let database: FreshDatabase | undefined;
  let nodes: Node[] = [];
  let warehouse: string | undefined;
  // Closed, it holds the first node's transactions after their work, before their commit.
  const held = gate();
  beforeAll(async () => {
    if (!(await backend.up())) return;
    database = await backend.fresh();
    if (backend.name === 'SQLite') nodes = [await startNode(database.url, {}, { beforeCommit: held.pass })];
    else {
      // Nodes of one catalog share its warehouse.
      warehouse = mkdtempSync(join(tmpdir(), 'idem-shared-warehouse-'));
      nodes = [
        await startNode(database.url, { WAREHOUSE: warehouse }, { beforeCommit: held.pass }),
        await startNode(database.url, { WAREHOUSE: warehouse }),
      ];
    }
    await call((nodes[0] as Node).url, 'POST', '/v1/namespaces', { body: { namespace: ['n'] } });
  });
  afterAll(async () => {
    for (const node of nodes) await node.close();
    await database?.drop();
    if (warehouse !== undefined) rmSync(warehouse, { recursive: true, force: true });
  });
  const url = (i: number) => (nodes[i % nodes.length] as Node).url;

  test.for(forms)(
    'as a $form, the first held before its commit: it lands, the other is a 409 and leaves no file',
    async ({ id, ok, send }, context) => {
      if (nodes.length === 0) return context.skip();
      const name = `${id}_raced`;
      const staged = await stage(url(0), name);
      const directory = directoryOf(staged.location as string);
      held.close();
      const first = send(url(0), 'n', name, createChange(staged));
      let second: ReturnType<typeof send>;
      try {
        await held.entered;
        second = send(url(1), 'n', name, createChange(staged));
        if (nodes.length > 1) {
          // The second has checked the name (not taken yet: the first has not committed) and written its file;
          // its insert waits on the first's.
          const untilMs = performance.now() + 10_000;
          while (metadataFiles(directory).length < 2 && performance.now() < untilMs)
            await new Promise((resolve) => setTimeout(resolve, 10));
          expect(metadataFiles(directory)).toHaveLength(2);
        } else await new Promise((resolve) => setTimeout(resolve, 100));
      } finally {
        held.open();
      }
      const [won, lost] = [await first, await second];
      expect(won.status, won.text).toBe(ok);
      expect(lost.status, lost.text).toBe(409);
      expect(lost.json().error.type).toBe('CommitFailedException');
      // On a server database the second met the first at its insert; on SQLite it waited its turn, then found it.
      expect(lost.json().error.message).toMatch(nodes.length > 1 ? /created concurrently/ : /already exists/);
      const { 'metadata-location': metadataLocation } = (
        await call(url(0), 'GET', `/v1/namespaces/n/tables/${name}`)
      ).json();
      expect(metadataFiles(directory)).toEqual([fileURLToPath(metadataLocation)]);
    },
  );

  test('eight at once (both forms, on every node): one lands, seven 409s, one file', async (context) => {
    if (nodes.length === 0) return context.skip();
    const name = 'burst';
    const staged = await stage(url(0), name);
    const answers = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        (forms[i % 2] as (typeof forms)[number]).send(url(i), 'n', name, createChange(staged)),
      ),
    );
    const statuses = answers.map((answer) => answer.status);
    expect(
      statuses.filter((status) => status === 200 || status === 204),
      answers.map((a) => a.text).join('\n'),
    ).toHaveLength(1);
    expect(statuses.filter((status) => status === 409)).toHaveLength(7);
    for (const answer of answers.filter((a) => a.status === 409))
      expect(answer.json().error.type).toBe('CommitFailedException');
    const { 'metadata-location': metadataLocation } = (
      await call(url(0), 'GET', `/v1/namespaces/n/tables/${name}`)
    ).json();
    expect(metadataFiles(directoryOf(staged.location as string))).toEqual([fileURLToPath(metadataLocation)]);
  });
});
