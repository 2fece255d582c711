import { setTimeout as sleep } from 'node:timers/promises';
import { DEFAULT_TABLE } from '@idem/store-sql';
import pg from 'pg';
import { describe, expect, test } from 'vitest';
import { backends, everyDatabase } from './support/databases.js';
import { call, idempotencyRecords, type Node, newKey, startNode } from './support/server.js';

/** Records expire one second after first use (no grace); the scheduler runs every 100 ms, 2 records a batch. */
const SHORT_LIVED = {
  IDEMPOTENCY_KEY_LIFETIME: 'PT1S',
  IDEMPOTENCY_GRACE_MS: '0',
  IDEMPOTENCY_PURGE_INTERVAL_MS: '100',
  IDEMPOTENCY_PURGE_BATCH_SIZE: '2',
};

const recordCount = (node: Node) => idempotencyRecords(node);

/** Create namespaces with a key each: one idempotency record per request. */
async function createWithKeys(node: Node, count: number) {
  for (let i = 0; i < count; i++) {
    const answer = await call(node.url, 'POST', '/v1/namespaces', {
      key: newKey(),
      body: { namespace: [`n${i}`] },
    });
    expect(answer.status).toBe(200);
  }
}

for (const backend of everyDatabase) {
  describe.runIf(await backend.up())(`the purge scheduler on ${backend.name}`, () => {
    test('expired idempotency records are deleted: the table shrinks to 0, the catalog keeps its namespaces', async () => {
      const database = await backend.fresh();
      const node = await startNode(database.url, SHORT_LIVED);
      try {
        await createWithKeys(node, 5);
        const counts = [await recordCount(node)];
        const deadline = Date.now() + 10_000;
        while ((counts.at(-1) as number) > 0 && Date.now() < deadline) {
          await sleep(100);
          counts.push(await recordCount(node));
        }
        expect(counts[0]).toBe(5);
        expect(counts.at(-1)).toBe(0);
        // Never grows back: only expired records go, in batches of 2.
        expect(counts).toEqual([...counts].sort((a, b) => b - a));
        const namespaces = (await call(node.url, 'GET', '/v1/namespaces')).json().namespaces;
        expect(namespaces).toHaveLength(5);
      } finally {
        await node.close();
        await database.drop();
      }
    });
  });
}

const [postgres] = backends as [(typeof backends)[number]];

describe.runIf(await postgres.up())('the purge scheduler on a store database of its own', () => {
  test('IDEMPOTENCY_STORE_URL on PostgreSQL, the catalog on SQLite: the store’s table shrinks to 0, the catalog never held one', async () => {
    const records = await postgres.fresh();
    const node = await startNode('sqlite::memory:', { ...SHORT_LIVED, IDEMPOTENCY_STORE_URL: records.url });
    const client = new pg.Client({ connectionString: records.url });
    await client.connect();
    const storeCount = async () =>
      Number((await client.query(`SELECT count(*) AS n FROM ${DEFAULT_TABLE}`)).rows[0]?.n);
    try {
      await createWithKeys(node, 5);
      const counts = [await storeCount()];
      const deadline = Date.now() + 10_000;
      while ((counts.at(-1) as number) > 0 && Date.now() < deadline) {
        await sleep(100);
        counts.push(await storeCount());
      }
      expect(counts[0]).toBe(5);
      expect(counts.at(-1)).toBe(0);
      expect(await recordCount(node)).toBe(0); // the catalog's own table: never used
    } finally {
      await client.end();
      await node.close();
      await records.drop();
    }
  });
});

describe('the purge setting', () => {
  test('IDEMPOTENCY_PURGE_ENABLED=false keeps expired records', async () => {
    const node = await startNode('sqlite::memory:', { ...SHORT_LIVED, IDEMPOTENCY_PURGE_ENABLED: 'false' });
    try {
      await createWithKeys(node, 2);
      await sleep(1_300);
      expect(await recordCount(node)).toBe(2);
    } finally {
      await node.close();
    }
  });
});
