import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { SEPARATOR } from '../src/catalog/repository.js';
import { backends } from './support/databases.js';
import { view } from './support/hostile.js';
import { call, type Node, schema, startNode } from './support/server.js';

// Dropping a namespace checks that it is empty; creating in it checks that it exists. Without locks both could
// commit, leaving a table, a view or a child namespace in a namespace that no longer exists. Creates share-lock
// the namespace's row, a drop locks it for update: they take turns, and whichever comes second sees the first.

for (const backend of backends) {
  describe.runIf(await backend.up())(`${backend.name}: drop namespace racing creates in it`, () => {
    let node: Node;
    let db: { url: string; drop(): Promise<void> };
    beforeAll(async () => {
      db = await backend.fresh();
      node = await startNode(db.url, { IDEMPOTENCY_PURGE_ENABLED: 'false' });
    });
    afterAll(async () => {
      await node.close();
      await db.drop();
    });

    test('nothing outlives its namespace', async () => {
      for (let i = 0; i < 30; i++) {
        await Promise.all(
          [`t${i}`, `v${i}`, `p${i}`, `m${i}`].map((ns) =>
            call(node.url, 'POST', '/v1/namespaces', { body: { namespace: [ns] } }),
          ),
        );
        await call(node.url, 'POST', `/v1/namespaces/m${i}/tables`, { body: { name: 'moving', schema } });
        await Promise.all([
          call(node.url, 'POST', `/v1/namespaces/t${i}/tables`, { body: { name: 't', schema } }),
          call(node.url, 'DELETE', `/v1/namespaces/t${i}`),
          call(node.url, 'POST', `/v1/namespaces/v${i}/views`, {
            body: { ...view, 'view-version': { ...view['view-version'], 'default-namespace': [`v${i}`] } },
          }),
          call(node.url, 'DELETE', `/v1/namespaces/v${i}`),
          call(node.url, 'POST', '/v1/namespaces', { body: { namespace: [`p${i}`, 'child'] } }),
          call(node.url, 'DELETE', `/v1/namespaces/p${i}`),
          call(node.url, 'POST', '/v1/tables/rename', {
            body: {
              source: { namespace: [`m${i}`], name: 'moving' },
              destination: { namespace: [`t${i}`], name: 'moved' },
            },
          }),
        ]);
      }
      const entities = await node.db.rows(sql`SELECT e.namespace, e.name FROM catalog_entities e
        LEFT JOIN catalog_namespaces n ON n.prefix = e.prefix AND n.namespace = e.namespace
        WHERE n.namespace IS NULL`);
      expect(entities).toEqual([]);
      const namespaces = (await node.db.rows(sql`SELECT namespace FROM catalog_namespaces`)).map((row) =>
        Buffer.isBuffer(row.namespace) ? row.namespace.toString('utf8') : String(row.namespace),
      );
      const orphans = namespaces.filter(
        (ns) => ns.includes(SEPARATOR) && !namespaces.includes(ns.slice(0, ns.lastIndexOf(SEPARATOR))),
      );
      expect(orphans).toEqual([]);
    }, 60_000);
  });
}
