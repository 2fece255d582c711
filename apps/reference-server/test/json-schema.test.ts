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
  ])('%s', (_name, body) => {
    expect(commit(body), JSON.stringify(commit.errors)).toBe(true);
  });

  test('`variant` is a type although the spec lists it under both VariantType and PrimitiveType (oneOf read as anyOf)', () => {
    const schema = { type: 'struct', fields: [{ id: 1, name: 'v', required: false, type: 'variant' }] };
    expect(createTable({ name: 't', schema }), JSON.stringify(createTable.errors)).toBe(true);
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
      'an integer past 2^53',
      { requirements: [{ type: 'assert-current-schema-id', 'current-schema-id': 2 ** 60 }], updates: [] },
      '/requirements/0/current-schema-id',
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

  test('a JSON body is never coerced: a number where a string belongs is a 400', () => {
    expect(createTable({ name: 5, schema: { type: 'struct', fields: [] } })).toBe(false);
  });
});
