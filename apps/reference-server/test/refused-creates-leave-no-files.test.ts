import { readdirSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { view } from './support/hostile.js';
import { call, type Node, newKey, schema, startNodeWithTable } from './support/server.js';

// A create is written only once its key is reserved and its name found free, in the namespace that exists: a
// refused one (404 namespace, 409 name taken) leaves no metadata file behind, however often it is sent.

let node: Node;
beforeAll(async () => {
  node = await startNodeWithTable('exists');
});
afterAll(async () => node.close());

const metadataFiles = () =>
  readdirSync(node.warehouse, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.json'));

describe('refused creates leave nothing behind', () => {
  test.each([
    [
      'a table in a namespace that does not exist (404)',
      '/v1/namespaces/missing/tables',
      { name: 'x', schema },
      404,
    ],
    ['a table whose name is taken (409)', '/v1/namespaces/n/tables', { name: 'exists', schema }, 409],
    ['a view whose name a table has (409)', '/v1/namespaces/n/views', { ...view, name: 'exists' }, 409],
    ['a view in a namespace that does not exist (404)', '/v1/namespaces/missing/views', view, 404],
  ])('%s', async (_label, path, body, status) => {
    const before = metadataFiles();
    for (let i = 0; i < 3; i++) {
      const answer = await call(node.url, 'POST', path, { key: newKey(), body });
      expect(answer.status, answer.text).toBe(status);
    }
    expect(metadataFiles()).toEqual(before);
  });
});
