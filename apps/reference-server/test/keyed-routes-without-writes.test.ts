import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { everyDatabase, type FreshDatabase } from './support/databases.js';
import { call, idempotencyRecords, type Node, newKey, schema, startNode } from './support/server.js';

// Keyed POSTs that commit nothing to the catalog (a staged create, a metrics report) hold their key as every
// mutation does: their answer is the key's, replayed to a retry, and a key used for another request is refused.
// Before, they answered without reserving it, so that on the catalog's own store (keys reserved in the
// mutation's transaction) the key was ignored: each retry of a staged create staged another table.

const metrics = {
  'report-type': 'commit-report',
  'table-name': 'n.t',
  'snapshot-id': 1,
  'sequence-number': 1,
  operation: 'append',
  metrics: {},
};

describe.each(everyDatabase)('on $name', (backend) => {
  let database: FreshDatabase | undefined;
  let node: Node | undefined;
  beforeAll(async () => {
    if (!(await backend.up())) return;
    database = await backend.fresh();
    node = await startNode(database.url);
    await call(node.url, 'POST', '/v1/namespaces', { body: { namespace: ['n'] } });
    await call(node.url, 'POST', '/v1/namespaces/n/tables', { body: { name: 't', schema } });
  });
  afterAll(async () => {
    await node?.close();
    await database?.drop();
  });

  test.for<[string, string, object, number]>([
    ['a staged create', '/v1/namespaces/n/tables', { name: 'staged', schema, 'stage-create': true }, 200],
    ['a metrics report', '/v1/namespaces/n/tables/t/metrics', metrics, 204],
    ['a metrics report of a table that does not exist', '/v1/namespaces/n/tables/none/metrics', metrics, 404],
  ])('%s, retried: the stored answer, replayed', async ([, path, body, status], context) => {
    if (node === undefined) return context.skip();
    const key = newKey();
    const first = await call(node.url, 'POST', path, { key, body });
    expect(first.status, first.text).toBe(status);
    const retry = await call(node.url, 'POST', path, { key, body });
    expect(retry.status).toBe(status);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    // The same staged table (its UUID, its location), not another one.
    expect(retry.text).toBe(first.text);
    expect(await idempotencyRecords(node, key)).toBe(1);
  });

  test.for<[string, string, object]>([
    ['a staged create', '/v1/namespaces/n/tables', { name: 'staged', schema, 'stage-create': true }],
    ['a metrics report', '/v1/namespaces/n/tables/t/metrics', metrics],
  ])(
    'a key used for a namespace create, then for %s: refused with 400, nothing done',
    async ([, path, body], context) => {
      if (node === undefined) return context.skip();
      const key = newKey();
      const first = await call(node.url, 'POST', '/v1/namespaces', { key, body: { namespace: [`k${key}`] } });
      expect(first.status, first.text).toBe(200);
      const reused = await call(node.url, 'POST', path, { key, body });
      expect(reused.status, reused.text).toBe(400);
      expect(reused.json().error.type).toBe('BadRequestException');
    },
  );
});
