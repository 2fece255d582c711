import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { call, type Node, newKey, schema, startNode } from './support/server.js';

// One key, two requests to different resources: the second is misuse (400, as the spec declares no 422) and
// must never be answered with the first one's replay, which would leave the second resource untouched.

let node: Node;
beforeAll(async () => {
  node = await startNode('sqlite::memory:');
  for (const namespace of ['a', 'b', 'x', 'y']) {
    await call(node.url, 'POST', '/v1/namespaces', { body: { namespace: [namespace] } });
  }
  for (const namespace of ['x', 'y']) {
    await call(node.url, 'POST', `/v1/namespaces/${namespace}/tables`, { body: { name: 't', schema } });
  }
});
afterAll(async () => node.close());

const reused = (answer: { status: number; headers: Headers; json(): { error: { type: string } } }) => {
  expect(answer.status).toBe(400);
  expect(answer.headers.get('idempotent-replayed')).toBeNull();
  expect(answer.json().error.type).toBe('BadRequestException');
};

describe('request identity on the catalog: the path and the query are part of it', () => {
  test('one key on DELETE namespace a, then b: b is refused and still exists', async () => {
    const key = newKey();
    expect((await call(node.url, 'DELETE', '/v1/namespaces/a', { key })).status).toBe(204);
    reused(await call(node.url, 'DELETE', '/v1/namespaces/b', { key }));
    expect((await call(node.url, 'HEAD', '/v1/namespaces/b')).status).toBe(204);
  });

  test('one key on a commit to x.t, then the same commit to y.t: y.t is refused and unchanged', async () => {
    const key = newKey();
    const commit = { requirements: [], updates: [{ action: 'set-properties', updates: { k: 'v' } }] };
    expect((await call(node.url, 'POST', '/v1/namespaces/x/tables/t', { key, body: commit })).status).toBe(
      200,
    );
    reused(await call(node.url, 'POST', '/v1/namespaces/y/tables/t', { key, body: commit }));
    const y = (await call(node.url, 'GET', '/v1/namespaces/y/tables/t')).json();
    expect(y.metadata.properties?.k).toBeUndefined();
  });

  test('one key on a drop without, then with purgeRequested: the second is refused', async () => {
    await call(node.url, 'POST', '/v1/namespaces/x/tables', { body: { name: 'gone', schema } });
    const key = newKey();
    expect((await call(node.url, 'DELETE', '/v1/namespaces/x/tables/gone', { key })).status).toBe(204);
    reused(await call(node.url, 'DELETE', '/v1/namespaces/x/tables/gone?purgeRequested=true', { key }));
  });

  test('the same request retried replays, whatever its JSON key order', async () => {
    const key = newKey();
    const first = await call(node.url, 'POST', '/v1/namespaces', {
      key,
      raw: '{"namespace":["same"],"properties":{"a":"1","b":"2"}}',
    });
    const retry = await call(node.url, 'POST', '/v1/namespaces', {
      key,
      raw: '{ "properties": {"b":"2","a":"1"}, "namespace": ["same"] }',
    });
    expect(first.status).toBe(200);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
  });
});
