import { afterEach, expect, test } from 'vitest';
import { backends } from './support/databases.js';
import { call, type Node, newKey, startNode } from './support/server.js';

// The read before a keyed mutation's transaction (IDEMPOTENCY_READ_BEFORE_TRANSACTION) ends by the request's
// deadline, as the transaction does: a keyed mutation that arrives while a slow transaction holds the
// connection (SQLite's one, a pool of one elsewhere) answers its retryable 503 within the request's one
// deadline (REQUEST_TIMEOUT_MS), as an unkeyed one does, and not at the coordinator's store timeout (2 s).

const DEADLINE_MS = 500;
const MARGIN_MS = 250;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

let node: Node | undefined;
afterEach(async () => {
  await node?.close();
  node = undefined;
});

const fresh: { name: string; url: () => Promise<{ url: string; drop?: () => Promise<void> }> }[] = [
  { name: 'SQLite', url: async () => ({ url: 'sqlite::memory:' }) },
  ...backends.map((b) => ({ name: b.name, url: b.fresh })),
];
const kinds = [
  { keyed: false, read: false, what: 'unkeyed' },
  { keyed: true, read: true, what: 'keyed (read before the transaction)' },
  { keyed: true, read: false, what: 'keyed' },
];
for (const { name, url } of fresh)
  for (const { keyed, read, what } of kinds) {
    test(`${name}: ${what} mutation behind a transaction holding the only connection: 503 within the request deadline`, async () => {
      const database = await url();
      // Pool of one on a server database: the transaction below holds it, as SQLite's one connection is held.
      node = await startNode(database.url, {
        REQUEST_TIMEOUT_MS: String(DEADLINE_MS),
        DATABASE_POOL_SIZE: '1',
        IDEMPOTENCY_READ_BEFORE_TRANSACTION: String(read),
      });
      // A transaction that awaits (a metadata file written) keeps the connection's turn for 3 s.
      const holding = node.db.transaction(async () => {
        await sleep(3_000);
      });
      await sleep(20);
      const startedMs = performance.now();
      const answer = await call(node.url, 'POST', '/v1/namespaces', {
        ...(keyed ? { key: newKey() } : {}),
        body: { namespace: ['late'] },
      });
      const ms = performance.now() - startedMs;
      await holding;
      await node.close();
      node = undefined;
      await database.drop?.();
      expect(answer.status, answer.text).toBe(503);
      expect(ms, `answered after ${Math.round(ms)} ms`).toBeLessThan(DEADLINE_MS + MARGIN_MS);
    });
  }
