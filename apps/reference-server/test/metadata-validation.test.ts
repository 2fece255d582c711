import { mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { INT32_MAX, MAX_ENTITY_LOCATION_BYTES, MAX_LOCATION_BYTES } from '../src/catalog/limits.js';
import { view as viewRequest } from './support/hostile.js';
import { type Answer, call, type Node, newKey, schema, startNode } from './support/server.js';

// Updates and creates that would make table or view metadata Iceberg itself refuses, or metadata the catalog
// would then refuse to read back, are refused: a 400 BadRequestException, before any metadata file is written.

type Kind = 'table' | 'view';
const KINDS: readonly Kind[] = ['table', 'view'];

let node: Node;
beforeAll(async () => {
  node = await startNode('sqlite::memory:');
  await call(node.url, 'POST', '/v1/namespaces', { body: { namespace: ['n'] } });
});
afterAll(async () => node.close());

let made = 0;
const fresh = (kind: Kind) => `${kind === 'table' ? 't' : 'v'}${++made}`;
const view = (name: string) => ({
  ...viewRequest,
  name,
  'view-version': { ...viewRequest['view-version'], 'default-namespace': ['n'] },
});
const collection = (kind: Kind) => (kind === 'table' ? 'tables' : 'views');

/** Create a table or view (`extra` merged into the request), refused or not. */
const create = (kind: Kind, extra: Record<string, unknown> = {}) => {
  const name = fresh(kind);
  const body = kind === 'table' ? { name, schema, ...extra } : { ...view(name), ...extra };
  return { name, answer: call(node.url, 'POST', `/v1/namespaces/n/${collection(kind)}`, { body }) };
};

const created = async (kind: Kind, extra: Record<string, unknown> = {}) => {
  const { name, answer } = create(kind, extra);
  const done = await answer;
  expect(done.status, done.text).toBe(200);
  return { name, answer: done };
};

const commit = (kind: Kind, name: string, updates: unknown[]) =>
  call(node.url, 'POST', `/v1/namespaces/n/${collection(kind)}/${name}`, {
    body: kind === 'table' ? { requirements: [], updates } : { updates },
  });

const load = (kind: Kind, name: string) =>
  call(node.url, 'GET', `/v1/namespaces/n/${collection(kind)}/${name}`);

const register = (kind: Kind, metadataLocation: string, name = fresh(kind)) =>
  call(node.url, 'POST', `/v1/namespaces/n/${kind === 'table' ? 'register' : 'register-view'}`, {
    body: { name, 'metadata-location': metadataLocation },
  });

/** Every metadata file in the warehouse. */
const metadataFiles = () =>
  readdirSync(node.warehouse, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.json'));

/** `send` answers 400 BadRequestException with a message matching `message`, and writes no file. */
async function expectRefused(send: () => Promise<Answer>, message: RegExp): Promise<Answer> {
  const before = metadataFiles();
  const answer = await send();
  expect(answer.status, answer.text).toBe(400);
  expect(answer.json().error).toMatchObject({ type: 'BadRequestException', code: 400 });
  expect(answer.json().error.message).toMatch(message);
  expect(metadataFiles()).toEqual(before);
  return answer;
}

/** A commit of `updates` is refused, and the table or view is as it was. */
async function expectCommitRefused(kind: Kind, name: string, updates: unknown[], message: RegExp) {
  const before = await load(kind, name);
  await expectRefused(() => commit(kind, name, updates), message);
  const after = await load(kind, name);
  expect(after.json()['metadata-location']).toBe(before.json()['metadata-location']);
  expect(after.json().metadata).toEqual(before.json().metadata);
}

// biome-ignore lint/suspicious/noExplicitAny: a copy's fields are changed one by one, as the test needs.
type Editable = any;

/** Register, under a new name, a copy of `metadata` changed by `change` and written into the warehouse. */
let copies = 0;
async function registerCopy(kind: Kind, metadata: Record<string, unknown>, change: (m: Editable) => void) {
  const copy = structuredClone(metadata);
  change(copy);
  const dir = join(node.warehouse, 'copies');
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `${String(++copies).padStart(5, '0')}-copy.metadata.json`);
  writeFileSync(file, JSON.stringify(copy));
  const name = fresh(kind);
  return { name, answer: await register(kind, file, name) };
}

const uuidOf = (kind: Kind, metadata: Record<string, unknown>) =>
  metadata[kind === 'table' ? 'table-uuid' : 'view-uuid'] as string;

describe('assign-uuid never reassigns a uuid (Iceberg’s builders: "Cannot reassign uuid")', () => {
  test.each(KINDS)('%s: another uuid is refused, and the uuid stays', async (kind) => {
    const { name } = await created(kind);
    await expectCommitRefused(
      kind,
      name,
      [{ action: 'assign-uuid', uuid: '0198b1a2-0000-7000-8000-000000000000' }],
      /Cannot reassign uuid/,
    );
  });

  test.each(KINDS)('%s: its own uuid again is accepted, and changes nothing', async (kind) => {
    const { name, answer } = await created(kind);
    const uuid = uuidOf(kind, answer.json().metadata);
    const again = await commit(kind, name, [{ action: 'assign-uuid', uuid }]);
    expect(again.status, again.text).toBe(200);
    expect(uuidOf(kind, again.json().metadata)).toBe(uuid);
  });

  describe('so a replay, which finds a created table by its uuid, finds its own', () => {
    let keyed: Node | undefined;
    afterAll(async () => keyed?.close());

    test('alice’s keyed create, retried after she dropped the table, replays her table, not bob’s: bob cannot give his table her uuid', async () => {
      keyed = await startNode('sqlite::memory:', { AUTH_TOKENS: 'ta=alice,tb=bob' });
      const { url } = keyed;
      await call(url, 'POST', '/v1/namespaces', { token: 'ta', body: { namespace: ['alice'] } });
      await call(url, 'POST', '/v1/namespaces', { token: 'tb', body: { namespace: ['bob'] } });
      const key = newKey();
      const body = { name: 'orders', schema };
      const first = await call(url, 'POST', '/v1/namespaces/alice/tables', { token: 'ta', key, body });
      expect(first.status, first.text).toBe(200);
      const aliceUuid = first.json().metadata['table-uuid'];
      // Alice drops her table (its files stay); the answer of her create stays replayable from its file.
      expect((await call(url, 'DELETE', '/v1/namespaces/alice/tables/orders', { token: 'ta' })).status).toBe(
        204,
      );
      // Bob, who can read alice's uuid, tries to give his own table that uuid.
      await call(url, 'POST', '/v1/namespaces/bob/tables', { token: 'tb', body: { name: 'mine', schema } });
      const stolen = await call(url, 'POST', '/v1/namespaces/bob/tables/mine', {
        token: 'tb',
        body: { requirements: [], updates: [{ action: 'assign-uuid', uuid: aliceUuid }] },
      });
      expect(stolen.status, stolen.text).toBe(400);
      expect(stolen.json().error.type).toBe('BadRequestException');
      // Alice's client retries her create (its first answer was lost).
      const replay = await call(url, 'POST', '/v1/namespaces/alice/tables', { token: 'ta', key, body });
      expect(replay.status, replay.text).toBe(200);
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
      expect(replay.json()['metadata-location']).toBe(first.json()['metadata-location']);
      expect(replay.json().metadata.location).toBe(first.json().metadata.location);
    });
  });
});

describe('a partition field or sort field must name a field of the current schema (Java binds them to it)', () => {
  // A field id the table's schema (ids 1, 2) does not have.
  const MISSING = 99;
  const added = {
    'add-spec': (source: number) => ({
      action: 'add-spec',
      spec: { fields: [{ 'source-id': source, transform: 'identity', name: `p${source}` }] },
    }),
    'add-sort-order': (source: number) => ({
      action: 'add-sort-order',
      'sort-order': {
        'order-id': 1,
        fields: [
          { 'source-id': source, transform: 'identity', direction: 'asc', 'null-order': 'nulls-first' },
        ],
      },
    }),
  };
  const actions = Object.keys(added) as (keyof typeof added)[];
  const withColumn3 = {
    action: 'add-schema',
    schema: {
      ...schema,
      fields: [...schema.fields, { id: 3, name: 'extra', required: false, type: 'long' }],
    },
  };

  test.each(actions)('%s: a source-id that is no field of any schema is refused', async (action) => {
    const { name } = await created('table');
    await expectCommitRefused('table', name, [added[action](MISSING)], /source-id 99 is no field/);
  });

  test.each(actions)(
    '%s: a source-id of a schema added in the same commit but not made current is refused',
    async (action) => {
      const { name } = await created('table');
      await expectCommitRefused('table', name, [withColumn3, added[action](3)], /source-id 3 is no field/);
    },
  );

  test.each(actions)(
    '%s: a source-id of the schema made current earlier in the commit is taken',
    async (action) => {
      const { name } = await created('table');
      const answer = await commit('table', name, [
        withColumn3,
        { action: 'set-current-schema', 'schema-id': -1 },
        added[action](3),
      ]);
      expect(answer.status, answer.text).toBe(200);
    },
  );

  test.each(actions)(
    '%s: a source-id of a field nested in a struct of the current schema is taken',
    async (action) => {
      const nested = {
        type: 'struct',
        fields: [
          { id: 1, name: 'id', required: true, type: 'long' },
          {
            id: 2,
            name: 's',
            required: false,
            type: { type: 'struct', fields: [{ id: 3, name: 'x', required: false, type: 'long' }] },
          },
        ],
      };
      const { name } = await created('table', { schema: nested });
      const answer = await commit('table', name, [added[action](3)]);
      expect(answer.status, answer.text).toBe(200);
    },
  );

  test.each([
    ['partition-spec', { fields: [{ 'source-id': MISSING, transform: 'identity', name: 'p' }] }],
    [
      'write-order',
      {
        'order-id': 1,
        fields: [
          { 'source-id': MISSING, transform: 'identity', direction: 'asc', 'null-order': 'nulls-first' },
        ],
      },
    ],
  ])('a new table whose %s names no field of its schema is refused', async (field, value) => {
    await expectRefused(() => create('table', { [field]: value }).answer, /source-id 99 is no field/);
  });
});

describe('a schema in which two fields share an id is refused, at any depth', () => {
  const long = (id: number, name: string) => ({ id, name, required: false, type: 'long' });
  const struct = (...fields: unknown[]) => ({ type: 'struct', fields });
  const list = (elementId: number, element: unknown) => ({
    type: 'list',
    'element-id': elementId,
    element,
    'element-required': false,
  });
  const map = (keyId: number, valueId: number, value: unknown) => ({
    type: 'map',
    'key-id': keyId,
    key: 'string',
    'value-id': valueId,
    value,
    'value-required': false,
  });
  const column = (id: number, name: string, type: unknown) => ({ id, name, required: false, type });

  // Each kind of nesting, with the id shared (1 unless said), and the same shape with ids all distinct.
  const shapes: Record<string, (dup: boolean) => unknown> = {
    'two columns': (dup) => struct(long(1, 'a'), long(dup ? 1 : 2, 'b')),
    'a column and a field of a nested struct': (dup) =>
      struct(long(1, 'a'), column(2, 's', struct(long(dup ? 1 : 3, 'x')))),
    'two fields of a nested struct': (dup) =>
      struct(column(1, 's', struct(long(2, 'x'), long(dup ? 2 : 3, 'y')))),
    'a column and a list element': (dup) => struct(long(1, 'a'), column(2, 'l', list(dup ? 1 : 3, 'long'))),
    'a column and a map key': (dup) => struct(long(1, 'a'), column(2, 'm', map(dup ? 1 : 3, 4, 'long'))),
    'a map key and its value': (dup) => struct(column(1, 'm', map(2, dup ? 2 : 3, 'long'))),
    'a column and a map value': (dup) => struct(long(1, 'a'), column(2, 'm', map(3, dup ? 1 : 4, 'long'))),
    'a column and a struct in a map in a list': (dup) =>
      struct(long(1, 'a'), column(2, 'l', list(3, map(4, 5, struct(long(dup ? 1 : 6, 'deep')))))),
  };
  // Where a schema goes: each readies what it needs, then sends a schema.
  type Send = (schema: unknown) => Promise<Answer>;
  const places: Record<string, () => Promise<Send>> = {
    'a new table': async () => (s) => create('table', { schema: s }).answer,
    'a table’s add-schema': async () => {
      const { name } = await created('table');
      return (s) => commit('table', name, [{ action: 'add-schema', schema: s }]);
    },
    'a new view': async () => (s) => create('view', { schema: { ...(s as object), 'schema-id': 0 } }).answer,
    'a view’s add-schema': async () => {
      const { name } = await created('view');
      return (s) => commit('view', name, [{ action: 'add-schema', schema: s }]);
    },
  };
  const cases = Object.keys(places).flatMap((place) => Object.keys(shapes).map((shape) => [place, shape]));

  test.each(cases)('%s: %s', async (place, shape) => {
    const send = await (places[place] as () => Promise<Send>)();
    const make = shapes[shape] as (dup: boolean) => unknown;
    await expectRefused(() => send(make(true)), /more than one field with id \d+/);
    const distinct = await send(make(false));
    expect(distinct.status, distinct.text).toBe(200);
  });
});

describe('ids the catalog assigns stop at int32’s maximum: the update that would pass it is refused', () => {
  interface IdCase {
    readonly kind: Kind;
    /** A table or view whose highest id of this kind is `at`: its name. */
    make(at: number): Promise<string>;
    /** The updates that assign the next id. */
    readonly updates: readonly unknown[];
  }
  const copyOf = async (kind: Kind, change: (m: Editable) => void) => {
    const { answer } = await created(kind);
    const copy = await registerCopy(kind, answer.json().metadata, change);
    expect(copy.answer.status, copy.answer.text).toBe(200);
    return copy.name;
  };
  const sortField = { 'source-id': 1, transform: 'identity', direction: 'asc', 'null-order': 'nulls-first' };
  const cases: Record<string, IdCase> = {
    'table: partition field id (add-spec)': {
      kind: 'table',
      make: async (at) =>
        (
          await created('table', {
            'partition-spec': {
              fields: [{ 'source-id': 1, 'field-id': at, transform: 'identity', name: 'p' }],
            },
          })
        ).name,
      updates: [
        { action: 'add-spec', spec: { fields: [{ 'source-id': 1, transform: 'bucket[4]', name: 'q' }] } },
      ],
    },
    'table: partition spec id (add-spec)': {
      kind: 'table',
      make: (at) =>
        copyOf('table', (m) => {
          m['partition-specs'][0]['spec-id'] = at;
          m['default-spec-id'] = at;
        }),
      updates: [{ action: 'add-spec', spec: { fields: [] } }],
    },
    'table: sort order id (add-sort-order)': {
      kind: 'table',
      // A copy: a create assigns its sort order id itself (sort-order-ids.test.ts).
      make: (at) =>
        copyOf('table', (m) => {
          m['sort-orders'] = [{ 'order-id': at, fields: [sortField] }];
          m['default-sort-order-id'] = at;
        }),
      updates: [{ action: 'add-sort-order', 'sort-order': { 'order-id': 1, fields: [sortField] } }],
    },
    'table: schema id (add-schema)': {
      kind: 'table',
      make: (at) =>
        copyOf('table', (m) => {
          m.schemas[0]['schema-id'] = at;
          m['current-schema-id'] = at;
        }),
      updates: [{ action: 'add-schema', schema }],
    },
    'view: version id (add-view-version)': {
      kind: 'view',
      make: async (at) =>
        (await created('view', { 'view-version': { ...view('')['view-version'], 'version-id': at } })).name,
      updates: [
        { action: 'add-view-version', 'view-version': { ...view('')['view-version'], 'version-id': 1 } },
        { action: 'set-current-view-version', 'view-version-id': -1 },
      ],
    },
    'view: schema id (add-schema)': {
      kind: 'view',
      make: (at) =>
        copyOf('view', (m) => {
          m.schemas[0]['schema-id'] = at;
          for (const version of m.versions) version['schema-id'] = at;
        }),
      updates: [{ action: 'add-schema', schema: viewRequest.schema }],
    },
  };

  test.each(Object.keys(cases))('%s: at int32’s maximum, refused', async (label) => {
    const { kind, make, updates } = cases[label] as IdCase;
    const name = await make(INT32_MAX);
    await expectCommitRefused(kind, name, [...updates], /pass the largest 32-bit integer/);
  });

  test.each(Object.keys(cases))(
    '%s: one below, the last id is assigned, and its file registers again',
    async (label) => {
      const { kind, make, updates } = cases[label] as IdCase;
      const answer = await commit(kind, await make(INT32_MAX - 1), [...updates]);
      expect(answer.status, answer.text).toBe(200);
      const again = await register(kind, answer.json()['metadata-location']);
      expect(again.status, `its own file: ${again.text}`).toBe(200);
    },
  );

  test('a new table whose partition field ids would pass int32’s maximum is refused', async () => {
    const fields = [
      { 'source-id': 1, 'field-id': INT32_MAX, transform: 'identity', name: 'p' },
      { 'source-id': 2, transform: 'identity', name: 'q' },
    ];
    await expectRefused(
      () => create('table', { 'partition-spec': { fields } }).answer,
      /pass the largest 32-bit integer/,
    );
  });
});

describe('a table’s or view’s location leaves room for its metadata files: every metadata-location answered can be sent back', () => {
  /** A location in the warehouse naming a path of exactly `bytes` bytes. */
  const locationOf = (bytes: number) => {
    let location = node.warehouse;
    while (Buffer.byteLength(location) + 201 < bytes) location = join(location, 'd'.repeat(200));
    location = join(location, 'e'.repeat(bytes - Buffer.byteLength(location) - 1));
    expect(Buffer.byteLength(location)).toBe(bytes);
    return location;
  };
  const tooLong = new RegExp(`at most ${MAX_ENTITY_LOCATION_BYTES} bytes`);

  test.each(KINDS)(
    `%s at a location of the longest accepted path (${MAX_ENTITY_LOCATION_BYTES} bytes): its metadata-locations register again, before and after a commit`,
    async (kind) => {
      const { name, answer } = await created(kind, { location: locationOf(MAX_ENTITY_LOCATION_BYTES) });
      const again = await register(kind, answer.json()['metadata-location']);
      expect(again.status, again.text).toBe(200);
      const committed = await commit(kind, name, [{ action: 'set-properties', updates: { a: 'b' } }]);
      expect(committed.status, committed.text).toBe(200);
      const yetAgain = await register(kind, committed.json()['metadata-location']);
      expect(yetAgain.status, yetAgain.text).toBe(200);
    },
  );

  const longer = {
    'one byte longer': MAX_ENTITY_LOCATION_BYTES + 1,
    'the whole location limit': MAX_LOCATION_BYTES,
  };
  const cases = KINDS.flatMap((kind) =>
    Object.entries(longer).map(([length, bytes]) => ({ kind, length, bytes })),
  );

  test.each(cases)('$kind created at a location $length: refused', async ({ kind, bytes }) => {
    await expectRefused(() => create(kind, { location: locationOf(bytes) }).answer, tooLong);
  });

  test.each(cases)('$kind moved by set-location to a location $length: refused', async ({ kind, bytes }) => {
    const { name } = await created(kind);
    await expectCommitRefused(kind, name, [{ action: 'set-location', location: locationOf(bytes) }], tooLong);
  });

  test.each(cases)(
    '$kind registered from a file whose location is $length: refused',
    async ({ kind, bytes }) => {
      const { answer } = await created(kind);
      const before = await call(node.url, 'GET', `/v1/namespaces/n/${collection(kind)}`);
      const copy = await registerCopy(kind, answer.json().metadata, (m) => {
        m.location = locationOf(bytes);
      });
      expect(copy.answer.status, copy.answer.text).toBe(400);
      expect(copy.answer.json().error.type).toBe('BadRequestException');
      expect(copy.answer.json().error.message).toMatch(tooLong);
      const after = await call(node.url, 'GET', `/v1/namespaces/n/${collection(kind)}`);
      expect(after.json()).toEqual(before.json());
    },
  );
});
