import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { call, idempotencyRecords, type Node, newKey, schema, startNodeWithTable } from './support/server.js';

// Requests whose shape alone is wrong, whatever the catalog holds, are refused before their key is reserved:
// a 4xx that leaves no idempotency record, so that a corrected request may use the same key.

let node: Node;
beforeAll(async () => {
  node = await startNodeWithTable();
});
afterAll(async () => node.close());

const cases: [string, string, unknown][] = [
  [
    'a transaction change without an identifier (the spec: "must provide an identifier")',
    '/v1/transactions/commit',
    { 'table-changes': [{ requirements: [], updates: [] }] },
  ],
  [
    'a table format-version property of 9',
    '/v1/namespaces/n/tables',
    { name: 'fv', schema, properties: { 'format-version': '9' } },
  ],
  [
    'a property both updated and removed',
    '/v1/namespaces/n/properties',
    { updates: { a: 'b' }, removals: ['a'] },
  ],
  [
    'a view whose version-id is not an integer',
    '/v1/namespaces/n/views',
    {
      name: 'v',
      schema: { type: 'struct', fields: [] },
      properties: {},
      'view-version': { 'version-id': 'x' },
    },
  ],
];

describe('malformed requests take no key', () => {
  test.each(cases)('%s', async (_name, path, body) => {
    const key = newKey();
    const answer = await call(node.url, 'POST', path, { key, body });
    expect(answer.status, answer.text).toBeGreaterThanOrEqual(400);
    expect(answer.status, answer.text).toBeLessThan(500);
    expect(await idempotencyRecords(node, key)).toBe(0);
  });
});
