import { mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  BODIES,
  EXISTING,
  LOCATION_PLACES,
  locations,
  NAME_PLACES,
  NAMES,
  NUMBER_PLACES,
  NUMBERS,
  PREFIX_SEGMENTS,
  type Route,
  routes,
  SEGMENTS,
  view,
  WIDE_INTEGERS,
} from './support/hostile.js';
import { checkResponse } from './support/openapi.js';
import { call, idempotencyRecords, type Node, newKey, schema, startNode } from './support/server.js';

// Every case below must be refused with a 4xx the spec declares for its operation, as an IcebergErrorResponse,
// without Retry-After, without storing anything (no idempotency record, no catalog change, no file), and the
// server must answer GET /v1/config at once afterwards. One server for the whole file.

let node: Node;
let outside: string;
let metadata: { table: string; view: string };
let allRoutes: Route[];

beforeAll(async () => {
  node = await startNode('sqlite::memory:');
  outside = mkdtempSync(join(tmpdir(), 'idem-hostile-outside-'));
  writeFileSync(join(outside, 'canary'), 'untouched');
  symlinkSync(outside, join(node.warehouse, 'link-out'));
  await call(node.url, 'POST', '/v1/namespaces', { body: { namespace: [EXISTING.ns] } });
  const table = await call(node.url, 'POST', '/v1/namespaces/hns/tables', { body: { name: 't', schema } });
  const created = await call(node.url, 'POST', '/v1/namespaces/hns/views', { body: { ...view, name: 'v' } });
  metadata = { table: table.json()['metadata-location'], view: created.json()['metadata-location'] };
  allRoutes = routes(metadata);
});
afterAll(async () => {
  await node.close();
  rmSync(outside, { recursive: true, force: true });
});

const isMutation = (method: string) => method === 'POST' || method === 'DELETE';

function filesUnder(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' }).sort();
}

/** Everything a request could have changed. */
async function state() {
  return {
    records: await idempotencyRecords(node),
    namespaces: await node.db.rows(sql`SELECT prefix, namespace, properties FROM catalog_namespaces`),
    entities: await node.db.rows(
      sql`SELECT prefix, namespace, name, metadata_location FROM catalog_entities`,
    ),
    warehouse: filesUnder(node.warehouse),
    outside: filesUnder(outside),
  };
}

interface Attempt {
  readonly method: string;
  /** The path sent, possibly with a prefix and hostile segments. */
  readonly path: string;
  /** The same operation's path as the spec matches it (no prefix, plain segments). */
  readonly operation: string;
  readonly body?: string | Buffer;
  readonly type?: string;
  readonly headers?: Record<string, string>;
}

/** Send one hostile request and check everything the suite promises about its answer. */
async function expectRefused(attempt: Attempt, statuses: number[] = [400]) {
  const before = await state();
  const key = isMutation(attempt.method) ? (attempt.headers?.['idempotency-key'] ?? newKey()) : undefined;
  const headers: Record<string, string> = { ...attempt.headers };
  if (key !== undefined) headers['idempotency-key'] = key;
  if (attempt.body !== undefined) headers['content-type'] = attempt.type ?? 'application/json';
  const response = await fetch(node.url + attempt.path, {
    method: attempt.method,
    headers,
    ...(attempt.body === undefined ? {} : { body: attempt.body }),
  });
  const text = await response.text();
  expect(statuses, text).toContain(response.status);
  expect(checkResponse(attempt.method, attempt.operation, response.status, text)).toEqual([]);
  if (attempt.method !== 'HEAD') {
    expect(response.headers.get('content-type')).toMatch(/^application\/json/);
    expect(JSON.parse(text).error.code).toBe(response.status);
  }
  expect(response.headers.get('retry-after')).toBeNull();
  if (key !== undefined) expect(await idempotencyRecords(node, key)).toBe(0);
  expect(await state()).toEqual(before);
  const started = performance.now();
  expect((await call(node.url, 'GET', '/v1/config')).status).toBe(200);
  expect(performance.now() - started).toBeLessThan(500);
}

const fill = (path: string, values: Partial<Record<'ns' | 'table' | 'view', string>>) =>
  path.replace(/\{(ns|table|view)\}/g, (_, name: 'ns' | 'table' | 'view') => values[name] ?? EXISTING[name]);

const withBody = (route: Route) => (route.body === undefined ? {} : { body: JSON.stringify(route.body) });

// Route lists are only known once the fixtures exist: cases are built from the same tables at collection time.
const ROUTE_SHAPES = routes({ table: '', view: '' });
const routeOf = (shape: Route) =>
  allRoutes.find((r) => r.method === shape.method && r.path === shape.path) as Route;

describe('hostile path segments', () => {
  const cases = ROUTE_SHAPES.flatMap((shape) =>
    (['ns', 'table', 'view'] as const)
      .filter((param) => shape.path.includes(`{${param}}`))
      .flatMap((param) =>
        Object.entries(SEGMENTS).map(([name, segment]) => ({ shape, param, name, segment })),
      ),
  );
  test.each(cases)('$shape.method $shape.path with {$param} = $name', async ({ shape, param, segment }) => {
    const route = routeOf(shape);
    await expectRefused({
      method: route.method,
      path: fill(route.path, { [param]: segment }),
      operation: fill(route.path, {}),
      ...withBody(route),
    });
  });

  const prefixed = ROUTE_SHAPES.flatMap((shape) =>
    Object.entries(PREFIX_SEGMENTS).map(([name, segment]) => ({ shape, name, segment })),
  );
  test.each(prefixed)('$shape.method $shape.path with the prefix $name', async ({ shape, segment }) => {
    const route = routeOf(shape);
    await expectRefused({
      method: route.method,
      path: fill(route.path, {}).replace(/^\/v1\//, `/v1/${segment}/`),
      operation: fill(route.path, {}),
      ...withBody(route),
    });
  });
});

describe('hostile query strings', () => {
  test.each(Object.entries(SEGMENTS))('GET /v1/namespaces?parent= %s', async (_name, segment) => {
    await expectRefused({
      method: 'GET',
      path: `/v1/namespaces?parent=${segment}`,
      operation: '/v1/namespaces',
    });
  });

  test.each(['0', '-1', '1.5', '1e400', '12345678901234567890', 'abc', '%00'])(
    'GET /v1/namespaces?pageSize=%s',
    async (size) => {
      await expectRefused({
        method: 'GET',
        path: `/v1/namespaces?pageSize=${size}`,
        operation: '/v1/namespaces',
      });
    },
  );

  test.each(['maybe', '1', 'TRUE%00'])('DELETE a table with purgeRequested=%s', async (value) => {
    await expectRefused({
      method: 'DELETE',
      path: `/v1/namespaces/hns/tables/t?purgeRequested=${value}`,
      operation: '/v1/namespaces/hns/tables/t',
    });
  });
});

describe('hostile names in bodies', () => {
  const cases = Object.entries(NAME_PLACES).flatMap(([place, target]) =>
    Object.entries(NAMES).map(([name, value]) => ({ place, name, target, value })),
  );
  test.each(cases)('$place: $name', async ({ target, value }) => {
    await expectRefused({
      method: target.method,
      path: target.path,
      operation: target.path,
      body: JSON.stringify(target.body(value)),
    });
  });
});

describe('hostile numbers', () => {
  const cases = Object.entries(NUMBER_PLACES).flatMap(([place, target]) =>
    Object.entries({ ...NUMBERS, ...(target.int64 ? {} : WIDE_INTEGERS) }).map(([name, raw]) => ({
      place,
      name,
      target,
      raw,
    })),
  );
  test.each(cases)('$place: $name', async ({ target, raw }) => {
    await expectRefused({
      method: 'POST',
      path: target.path,
      operation: target.path,
      body: target.raw.replace('@N@', raw),
    });
  });

  // Not hostile: what an int64 field must take, exactly (a Java client's snapshot ids).
  const accepted = Object.entries(NUMBER_PLACES).flatMap(([place, target]) =>
    target.int64 === undefined
      ? []
      : Object.entries(WIDE_INTEGERS).map(([name, raw]) => ({ place, name, target, raw })),
  );
  test.each(accepted)('$place takes $name', async ({ target, raw }) => {
    const response = await call(node.url, 'POST', target.path, { raw: target.raw.replace('@N@', raw) });
    expect(response.status, response.text).toBe(target.int64?.accepts);
    expect(checkResponse('POST', target.path, response.status, response.text)).toEqual([]);
    if (target.raw.includes('add-snapshot')) {
      // The exact digits, however the request wrote them (1e18 is 1000000000000000000).
      const digits = raw === '1e18' ? '1000000000000000000' : raw;
      expect(response.text).toContain(`"snapshot-id":${digits},`);
    }
  });
});

describe('hostile bodies', () => {
  const cases = ROUTE_SHAPES.filter((shape) => shape.body !== undefined).flatMap((shape) =>
    Object.entries(BODIES).map(([name, body]) => ({ shape, name, body })),
  );
  test.each(cases)('$shape.method $shape.path: $name', async ({ shape, body }) => {
    const path = fill(shape.path, {});
    await expectRefused({
      method: shape.method,
      path,
      operation: path,
      body: body.raw,
      ...(body.type ? { type: body.type } : {}),
    });
  });
});

describe('hostile locations', () => {
  const names = Object.keys(locations('/w', '/o'));
  const cases = Object.entries(LOCATION_PLACES).flatMap(([place, target]) =>
    names.map((name) => ({ place, name, target })),
  );
  test.each(cases)('$place: $name', async ({ target, name }) => {
    const location = locations(node.warehouse, outside)[name] as string;
    await expectRefused(
      {
        method: 'POST',
        path: target.path,
        operation: target.path,
        body: JSON.stringify(target.body(location)),
      },
      [400, 403],
    );
  });
});

describe('hostile headers and request lines', () => {
  test.each([
    ['10k characters', 'x'.repeat(10_000)],
    ['two keys', `${newKey()}, ${newKey()}`],
    ['a UUIDv4', '1b4e28ba-2fa1-41d2-883f-0016d3cca427'],
  ])('an Idempotency-Key of %s', async (_name, key) => {
    await expectRefused({
      method: 'POST',
      path: '/v1/namespaces',
      operation: '/v1/namespaces',
      body: JSON.stringify({ namespace: ['fresh'] }),
      headers: { 'idempotency-key': key },
    });
  });

  test('a request line over Node’s header limit: a 400 IcebergErrorResponse, the server still up', async () => {
    const answer = await call(node.url, 'GET', `/v1/namespaces/${'x'.repeat(20_000)}`);
    expect(answer.status).toBe(400);
    expect(answer.json().error.type).toBe('BadRequestException');
    expect((await call(node.url, 'GET', '/v1/config')).status).toBe(200);
  });
});

describe('values at the limits are accepted', () => {
  test('a namespace of 1019 bytes in four levels and a 255-byte table name: created, files written', async () => {
    const levels = ['a', 'b', 'c', 'd'].map((c) => c.repeat(254));
    const orphan = await call(node.url, 'POST', '/v1/namespaces', { body: { namespace: levels } });
    expect(orphan.status, orphan.text).toBe(400); // its parent does not exist (the spec declares no 404 here)
    for (let depth = 1; depth <= levels.length; depth++) {
      const answer = await call(node.url, 'POST', '/v1/namespaces', {
        body: { namespace: levels.slice(0, depth) },
      });
      expect(answer.status, answer.text).toBe(200);
    }
    const name = `${'é'.repeat(127)}x`;
    const path = `/v1/namespaces/${levels.map(encodeURIComponent).join('%1F')}/tables`;
    const table = await call(node.url, 'POST', path, { body: { name, schema } });
    expect(table.status, table.text).toBe(200);
    expect(table.json()['metadata-location']).toContain(encodeURIComponent(name));
  });
});

describe('names that look like JavaScript internals are names like any other', () => {
  test('__proto__ and constructor as namespace, table and view names; property and ref names', async () => {
    for (const name of ['__proto__', 'constructor']) {
      expect((await call(node.url, 'POST', '/v1/namespaces', { body: { namespace: [name] } })).status).toBe(
        200,
      );
      expect((await call(node.url, 'GET', `/v1/namespaces/${name}`)).json().namespace).toEqual([name]);
      const created = await call(node.url, 'POST', `/v1/namespaces/${name}/tables`, {
        body: { name, schema },
      });
      expect(created.status, created.text).toBe(200);
      const snapshot = {
        'snapshot-id': 1,
        'timestamp-ms': 1,
        'manifest-list': 'm',
        summary: { operation: 'append' },
      };
      const committed = await call(node.url, 'POST', `/v1/namespaces/${name}/tables/${name}`, {
        body: {
          requirements: [{ type: 'assert-ref-snapshot-id', ref: name, 'snapshot-id': null }],
          updates: [
            { action: 'add-snapshot', snapshot },
            { action: 'set-snapshot-ref', 'ref-name': name, type: 'tag', 'snapshot-id': 1 },
          ],
        },
      });
      expect(committed.status, committed.text).toBe(200);
      expect(Object.keys(committed.json().metadata.refs)).toEqual([name]);
      const views = await call(node.url, 'POST', `/v1/namespaces/${name}/views`, {
        body: { ...view, name: `${name}v` },
      });
      expect(views.status).toBe(200);
    }
    const props = await call(node.url, 'POST', '/v1/namespaces/constructor/properties', {
      body: { updates: { constructor: 'c', toString: 't' }, removals: ['hasOwnProperty', 'valueOf'] },
    });
    expect(props.json()).toEqual({
      updated: ['constructor', 'toString'],
      removed: [],
      missing: ['hasOwnProperty', 'valueOf'],
    });
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  test('a long property value (900 KB) is text like any other: stored, and the server stays quick', async () => {
    const value = 'v'.repeat(900_000);
    const answer = await call(node.url, 'POST', '/v1/namespaces', {
      body: { namespace: ['long'], properties: { value } },
    });
    expect(answer.status).toBe(200);
    expect((await call(node.url, 'GET', '/v1/namespaces/long')).json().properties.value).toHaveLength(
      900_000,
    );
  });
});
