import { describe, expect, test } from 'vitest';
import { routeSchema } from '../src/http/route-schemas.js';
import { validatorCompiler } from '../src/http/validator.js';

type Validate = ((data: unknown) => boolean) & {
  errors?: { instancePath: string; message?: string }[] | null;
};

function validator(method: string, url: string, part: 'body' | 'params' | 'querystring'): Validate {
  const schema = routeSchema(method, url)?.[part];
  if (schema === undefined) throw new Error(`no ${part} schema for ${method} ${url}`);
  return validatorCompiler({ schema, method, url, httpPart: part }) as Validate;
}

const commit = validator('POST', '/v1/:prefix/namespaces/:namespace/tables/:table', 'body');
const createTable = validator('POST', '/v1/namespaces/:namespace/tables', 'body');

describe('request schemas from the OpenAPI document accept what the spec allows', () => {
  test.each([
    [
      'a nullable snapshot-id (3.0 `nullable`)',
      { requirements: [{ type: 'assert-ref-snapshot-id', ref: 'main', 'snapshot-id': null }], updates: [] },
    ],
    [
      'an update the spec lists that the catalog does not apply (its handler answers)',
      { requirements: [], updates: [{ action: 'remove-statistics', 'snapshot-id': 1 }] },
    ],
    [
      'fields the spec does not name (additionalProperties is not false)',
      { requirements: [], updates: [], extra: { any: 1 } },
    ],
    [
      'int64 ids over the whole range, past 2^53 as bigints (format: int64)',
      {
        requirements: [{ type: 'assert-ref-snapshot-id', ref: 'main', 'snapshot-id': 5938174936372637279n }],
        updates: [{ action: 'remove-snapshots', 'snapshot-ids': [2n ** 63n - 1n, -(2n ** 63n), 1, -1] }],
      },
    ],
  ])('%s', (_name, body) => {
    expect(commit(body), JSON.stringify(commit.errors)).toBe(true);
  });

  test('`variant` is a type although the spec lists it under both VariantType and PrimitiveType (oneOf read as anyOf)', () => {
    const schema = { type: 'struct', fields: [{ id: 1, name: 'v', required: false, type: 'variant' }] };
    expect(createTable({ name: 't', schema }), JSON.stringify(createTable.errors)).toBe(true);
  });

  test('a `type: number` takes an integer of any size (a double column default written without a fraction)', () => {
    const field = { id: 1, name: 'd', required: false, type: 'double', 'initial-default': 10n ** 20n };
    const schema = { type: 'struct', fields: [field] };
    expect(createTable({ name: 't', schema }), String(createTable.errors)).toBe(true);
  });
});

describe('and refuse what it does not, naming the field', () => {
  test.each([
    [
      'an unknown action picks no branch',
      { requirements: [], updates: [{ action: 'drop-everything' }] },
      '/updates/0',
    ],
    [
      'a tagged branch reports its own missing field',
      { requirements: [], updates: [{ action: 'assign-uuid' }] },
      '/updates/0',
    ],
    [
      'a requirement through the discriminated base',
      { requirements: [{ type: 'assert-table-uuid' }], updates: [] },
      '/requirements/0',
    ],
    [
      'an integer past int32 where the spec gives no format (a Java int)',
      { requirements: [{ type: 'assert-current-schema-id', 'current-schema-id': 2 ** 31 }], updates: [] },
      '/requirements/0/current-schema-id',
    ],
    [
      'a bigint where the spec gives no format',
      { requirements: [{ type: 'assert-current-schema-id', 'current-schema-id': 2n ** 60n }], updates: [] },
      '/requirements/0/current-schema-id',
    ],
    [
      'an int64 one past 2^63 - 1',
      { requirements: [], updates: [{ action: 'remove-snapshots', 'snapshot-ids': [1, 2n ** 63n] }] },
      '/updates/0/snapshot-ids/1',
    ],
    [
      'an int64 one below -2^63',
      { requirements: [], updates: [{ action: 'remove-snapshots', 'snapshot-ids': [-(2n ** 63n) - 1n] }] },
      '/updates/0/snapshot-ids/0',
    ],
    [
      'a fraction where an int64 belongs',
      { requirements: [], updates: [{ action: 'remove-snapshots', 'snapshot-ids': [1.5] }] },
      '/updates/0/snapshot-ids/0',
    ],
    [
      'a bigint where a string belongs (properties are strings only)',
      { requirements: [], updates: [{ action: 'set-properties', updates: { k: 5938174936372637279n } }] },
      '/updates/0/updates/k',
    ],
    [
      'a location with a control character',
      { requirements: [], updates: [{ action: 'set-location', location: 'a\u0001' }] },
      '/updates/0/location',
    ],
  ])('%s', (_name, body, path) => {
    expect(commit(body)).toBe(false);
    expect(commit.errors?.at(-1)?.instancePath).toBe(path);
  });

  test('path parameters carry the catalog limits; query strings are coerced to the spec types', () => {
    const params = validator('GET', '/v1/:prefix/namespaces/:namespace', 'params');
    expect(params({ prefix: 'p', namespace: 'a\u001fb' })).toBe(true);
    expect(params({ prefix: 'p', namespace: 'a\u001f\u001fb' })).toBe(false);
    const query = validator('GET', '/v1/namespaces', 'querystring');
    const data: Record<string, unknown> = { pageSize: '10' };
    expect(query(data)).toBe(true);
    expect(data.pageSize).toBe(10);
  });

  test('int64 and int32 failures say which range, a nullable one that null is allowed', () => {
    commit({ requirements: [], updates: [{ action: 'remove-snapshots', 'snapshot-ids': [2n ** 63n] }] });
    expect(commit.errors?.at(-1)?.message).toBe(
      'must be an int64 (from -9223372036854775808 to 9223372036854775807)',
    );
    commit({
      requirements: [{ type: 'assert-current-schema-id', 'current-schema-id': 2n ** 60n }],
      updates: [],
    });
    expect(commit.errors?.at(-1)?.message).toBe('must be an int32 (from -2147483648 to 2147483647)');
    commit({
      requirements: [{ type: 'assert-ref-snapshot-id', ref: 'main', 'snapshot-id': '1' }],
      updates: [],
    });
    expect(commit.errors?.at(-1)?.message).toBe('must be integer or null');
  });

  test('an integer query parameter is coerced text within int32', () => {
    const query = validator('GET', '/v1/namespaces', 'querystring');
    expect(query({ pageSize: '2147483647' })).toBe(true);
    expect(query({ pageSize: '2147483648' })).toBe(false);
    expect(query({ pageSize: '9223372036854775807' })).toBe(false);
  });

  test('a JSON body is never coerced: a number where a string belongs is a 400', () => {
    expect(createTable({ name: 5, schema: { type: 'struct', fields: [] } })).toBe(false);
  });
});
