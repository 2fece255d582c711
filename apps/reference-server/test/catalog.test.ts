import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { call, type Node, newKey, schema, startNode } from './support/server.js';

let node: Node;
beforeAll(async () => {
  node = await startNode('sqlite::memory:');
});
afterAll(async () => node.close());

describe('catalog on SQLite', () => {
  test('config advertises the endpoints and the key lifetime', async () => {
    const config = (await call(node.url, 'GET', '/v1/config')).json();
    expect(config['idempotency-key-lifetime']).toBe('PT30M');
    expect(config.endpoints).toContain('POST /v1/{prefix}/namespaces');
    expect(config).toMatchObject({ defaults: {}, overrides: {} });
  });

  test('namespaces: create, load, HEAD, list with parent and pages, properties, drop (409 when not empty)', async () => {
    expect(
      (await call(node.url, 'POST', '/v1/namespaces', { body: { namespace: ['a'], properties: { o: '1' } } }))
        .status,
    ).toBe(200);
    expect((await call(node.url, 'POST', '/v1/namespaces', { body: { namespace: ['a', 'b'] } })).status).toBe(
      200,
    );
    expect((await call(node.url, 'POST', '/v1/namespaces', { body: { namespace: ['a', 'c'] } })).status).toBe(
      200,
    );
    expect((await call(node.url, 'GET', '/v1/namespaces/a%1Fb')).json()).toEqual({
      namespace: ['a', 'b'],
      properties: {},
    });
    expect((await call(node.url, 'HEAD', '/v1/namespaces/a')).status).toBe(204);
    expect((await call(node.url, 'HEAD', '/v1/namespaces/zz')).status).toBe(404);
    const page = (await call(node.url, 'GET', '/v1/namespaces?parent=a&pageSize=1')).json();
    expect(page).toEqual({ namespaces: [['a', 'b']], 'next-page-token': '1' });
    expect((await call(node.url, 'GET', '/v1/namespaces?parent=a&pageSize=1&pageToken=1')).json()).toEqual({
      namespaces: [['a', 'c']],
    });
    const props = await call(node.url, 'POST', '/v1/namespaces/a/properties', {
      body: { updates: { x: 'y' }, removals: ['o', 'missing'] },
    });
    expect(props.json()).toEqual({ updated: ['x'], removed: ['o'], missing: ['missing'] });
    const dropNotEmpty = await call(node.url, 'DELETE', '/v1/namespaces/a');
    expect(dropNotEmpty.status).toBe(409);
    expect(dropNotEmpty.json().error.type).toBe('NamespaceNotEmptyException');
    expect((await call(node.url, 'DELETE', '/v1/namespaces/a%1Fb')).status).toBe(204);
    expect((await call(node.url, 'GET', '/v1/prefixed/namespaces')).json()).toEqual({ namespaces: [] });
  });

  test('tables: create, load with ETag and 304, commit a schema change and a snapshot, rename, drop', async () => {
    await call(node.url, 'POST', '/v1/namespaces', { body: { namespace: ['t'] } });
    const created = await call(node.url, 'POST', '/v1/namespaces/t/tables', {
      body: { name: 'orders', schema },
    });
    expect(created.status).toBe(200);
    const metadata = created.json().metadata;
    expect(metadata).toMatchObject({ 'format-version': 2, 'last-column-id': 2, 'current-schema-id': 0 });
    const loaded = await call(node.url, 'GET', '/v1/namespaces/t/tables/orders');
    const etag = loaded.headers.get('etag') as string;
    const cached = await fetch(`${node.url}/v1/namespaces/t/tables/orders`, {
      headers: { 'if-none-match': etag },
    });
    expect(cached.status).toBe(304);
    const commit = await call(node.url, 'POST', '/v1/namespaces/t/tables/orders', {
      body: {
        requirements: [
          { type: 'assert-table-uuid', uuid: metadata['table-uuid'] },
          { type: 'assert-current-schema-id', 'current-schema-id': 0 },
        ],
        updates: [
          {
            action: 'add-schema',
            schema: {
              type: 'struct',
              fields: [...schema.fields, { id: 3, name: 'at', required: false, type: 'timestamp' }],
            },
          },
          { action: 'set-current-schema', 'schema-id': -1 },
          {
            action: 'add-snapshot',
            snapshot: {
              'snapshot-id': 7,
              'timestamp-ms': 1,
              'manifest-list': 'file:///m.avro',
              summary: { operation: 'append' },
            },
          },
          { action: 'set-snapshot-ref', 'ref-name': 'main', type: 'branch', 'snapshot-id': 7 },
          { action: 'set-properties', updates: { owner: 'ana' } },
        ],
      },
    });
    expect(commit.status).toBe(200);
    expect(commit.json().metadata).toMatchObject({
      'current-schema-id': 1,
      'last-column-id': 3,
      'current-snapshot-id': 7,
      properties: { owner: 'ana' },
    });
    expect(commit.json()['metadata-location']).not.toBe(created.json()['metadata-location']);
    const stale = await call(node.url, 'POST', '/v1/namespaces/t/tables/orders', {
      body: { requirements: [{ type: 'assert-current-schema-id', 'current-schema-id': 0 }], updates: [] },
    });
    expect(stale.status).toBe(409);
    expect(stale.json().error.type).toBe('CommitFailedException');
    const rename = await call(node.url, 'POST', '/v1/tables/rename', {
      body: {
        source: { namespace: ['t'], name: 'orders' },
        destination: { namespace: ['t'], name: 'orders2' },
      },
    });
    expect(rename.status).toBe(204);
    expect((await call(node.url, 'GET', '/v1/namespaces/t/tables')).json()).toEqual({
      identifiers: [{ namespace: ['t'], name: 'orders2' }],
    });
    expect(
      (await call(node.url, 'DELETE', '/v1/namespaces/t/tables/orders2?purgeRequested=true')).status,
    ).toBe(204);
    expect((await call(node.url, 'HEAD', '/v1/namespaces/t/tables/orders2')).status).toBe(404);
  });

  test('bad input is a 400 IcebergErrorResponse naming the problem, never a 500', async () => {
    const cases = [
      await call(node.url, 'POST', '/v1/namespaces', { raw: '{"namespace": [' }),
      await call(node.url, 'POST', '/v1/namespaces', { body: { namespace: 'flat' } }),
      await call(node.url, 'POST', '/v1/namespaces', { body: { namespace: ['x'], properties: { a: 1 } } }),
      await call(node.url, 'POST', '/v1/namespaces/t/tables', { body: { name: 'x' } }),
      await call(node.url, 'POST', '/v1/namespaces/t/tables', {
        body: { name: 'x', schema: { type: 'struct', fields: [{ id: 'a' }] } },
      }),
    ];
    for (const answer of cases) {
      expect(answer.status, answer.text).toBe(400);
      expect(answer.headers.get('content-type')).toMatch(/application\/json/);
      expect(answer.json().error).toMatchObject({ type: 'BadRequestException', code: 400 });
    }
    expect(cases[2]?.json().error.message).toMatch(/properties\/a/);
    expect(cases[3]?.json().error.message).toMatch(/schema/);
  });
});

describe('idempotency on SQLite', () => {
  test('create namespace twice with one key: one namespace, identical answers, the replay header', async () => {
    const key = newKey();
    const first = await call(node.url, 'POST', '/v1/namespaces', { key, body: { namespace: ['idem1'] } });
    const second = await call(node.url, 'POST', '/v1/namespaces', { key, body: { namespace: ['idem1'] } });
    expect(first.status).toBe(200);
    expect(second.status).toBe(200);
    expect(second.text).toBe(first.text);
    expect(second.headers.get('idempotent-replayed')).toBe('true');
    // Without the key, the same request is a new one: 409 AlreadyExists.
    expect((await call(node.url, 'POST', '/v1/namespaces', { body: { namespace: ['idem1'] } })).status).toBe(
      409,
    );
  });

  test('a commit retried with its key is applied once', async () => {
    await call(node.url, 'POST', '/v1/namespaces', { body: { namespace: ['idem2'] } });
    await call(node.url, 'POST', '/v1/namespaces/idem2/tables', { body: { name: 't', schema } });
    const key = newKey();
    const commit = {
      requirements: [],
      updates: [{ action: 'add-schema', schema: { type: 'struct', fields: schema.fields } }],
    };
    const first = await call(node.url, 'POST', '/v1/namespaces/idem2/tables/t', { key, body: commit });
    const retry = await call(node.url, 'POST', '/v1/namespaces/idem2/tables/t', { key, body: commit });
    expect(retry.text).toBe(first.text);
    const table = (await call(node.url, 'GET', '/v1/namespaces/idem2/tables/t')).json();
    expect(table.metadata.schemas).toHaveLength(2);
  });

  test('a replayed create shows the table as it is now, even renamed since', async () => {
    await call(node.url, 'POST', '/v1/namespaces', { body: { namespace: ['idem8'] } });
    const key = newKey();
    const request = { name: 'fresh', schema };
    const created = await call(node.url, 'POST', '/v1/namespaces/idem8/tables', { key, body: request });
    await call(node.url, 'POST', '/v1/namespaces/idem8/tables/fresh', {
      body: { requirements: [], updates: [{ action: 'set-properties', updates: { later: 'yes' } }] },
    });
    await call(node.url, 'POST', '/v1/tables/rename', {
      body: {
        source: { namespace: ['idem8'], name: 'fresh' },
        destination: { namespace: ['idem8'], name: 'moved' },
      },
    });
    const replay = await call(node.url, 'POST', '/v1/namespaces/idem8/tables', { key, body: request });
    expect(replay.status).toBe(200);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(replay.json().metadata['table-uuid']).toBe(created.json().metadata['table-uuid']);
    expect(replay.json().metadata.properties).toEqual({ later: 'yes' });
    expect(replay.json()['metadata-location']).not.toBe(created.json()['metadata-location']);
    expect(replay.json().config).toEqual({});
  });

  test('drop twice with one key: 204 both times', async () => {
    await call(node.url, 'POST', '/v1/namespaces', { body: { namespace: ['idem3'] } });
    const key = newKey();
    expect((await call(node.url, 'DELETE', '/v1/namespaces/idem3', { key })).status).toBe(204);
    const again = await call(node.url, 'DELETE', '/v1/namespaces/idem3', { key });
    expect(again.status).toBe(204);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
  });

  test('same key, other body: 400, and nothing changed', async () => {
    const key = newKey();
    await call(node.url, 'POST', '/v1/namespaces', { key, body: { namespace: ['idem4'] } });
    const misuse = await call(node.url, 'POST', '/v1/namespaces', { key, body: { namespace: ['idem5'] } });
    expect(misuse.status).toBe(400);
    expect(misuse.json().error.type).toBe('BadRequestException');
    expect((await call(node.url, 'HEAD', '/v1/namespaces/idem5')).status).toBe(404);
  });

  test('an invalid key: 400 and nothing changed', async () => {
    const answer = await call(node.url, 'POST', '/v1/namespaces', {
      key: 'not-a-uuid',
      body: { namespace: ['idem6'] },
    });
    expect(answer.status).toBe(400);
    expect(answer.json().error).toMatchObject({ type: 'BadRequestException', code: 400 });
    expect((await call(node.url, 'HEAD', '/v1/namespaces/idem6')).status).toBe(404);
  });

  test('a 409 AlreadyExists is final: replayed, not re-run', async () => {
    await call(node.url, 'POST', '/v1/namespaces', { body: { namespace: ['idem7'] } });
    const key = newKey();
    const first = await call(node.url, 'POST', '/v1/namespaces', { key, body: { namespace: ['idem7'] } });
    expect(first.status).toBe(409);
    await call(node.url, 'DELETE', '/v1/namespaces/idem7');
    const retry = await call(node.url, 'POST', '/v1/namespaces', { key, body: { namespace: ['idem7'] } });
    expect(retry.status).toBe(409);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
  });
});

describe('principals and the disabled switch', () => {
  test('a key used by principal A is a different record for principal B', async () => {
    const secured = await startNode('sqlite::memory:', { AUTH_TOKENS: 'ta=alice,tb=bob' });
    try {
      expect((await call(secured.url, 'GET', '/v1/namespaces')).status).toBe(401);
      const key = newKey();
      const alice = await call(secured.url, 'POST', '/v1/namespaces', {
        key,
        token: 'ta',
        body: { namespace: ['p'] },
      });
      const bob = await call(secured.url, 'POST', '/v1/namespaces', {
        key,
        token: 'tb',
        body: { namespace: ['p'] },
      });
      expect(alice.status).toBe(200);
      expect(bob.status).toBe(409); // executed for Bob, not Alice's replay
      expect(bob.headers.get('idempotent-replayed')).toBeNull();
    } finally {
      await secured.close();
    }
  });

  test('disabled: the header is ignored and no lifetime is advertised', async () => {
    const off = await startNode('sqlite::memory:', { IDEMPOTENCY_ENABLED: 'false' });
    try {
      expect((await call(off.url, 'GET', '/v1/config')).json()).not.toHaveProperty(
        'idempotency-key-lifetime',
      );
      const key = newKey();
      expect(
        (await call(off.url, 'POST', '/v1/namespaces', { key, body: { namespace: ['d'] } })).status,
      ).toBe(200);
      expect(
        (await call(off.url, 'POST', '/v1/namespaces', { key, body: { namespace: ['d'] } })).status,
      ).toBe(409);
      expect(
        (await call(off.url, 'POST', '/v1/namespaces', { key: 'garbage', body: { namespace: ['e'] } }))
          .status,
      ).toBe(200);
    } finally {
      await off.close();
    }
  });
});
