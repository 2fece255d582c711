import { afterEach, expect, test } from 'vitest';
import { everyDatabase } from './support/databases.js';
import { call, type Node, newKey, startNode } from './support/server.js';

// Only a completed record that has not expired is answered, by the read before the transaction
// (IDEMPOTENCY_READ_BEFORE_TRANSACTION) as by the transaction: an expired one is neither replayed nor refused as
// a reused key, and the key runs again in the transaction.

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
let node: Node | undefined;
let drop: (() => Promise<void>) | undefined;
afterEach(async () => {
  await node?.close();
  node = undefined;
  await drop?.();
  drop = undefined;
});

for (const { name, fresh } of everyDatabase)
  for (const read of ['true', 'false'])
    for (const cache of ['0', '100'])
      test(`${name} (cache ${cache}, read before the transaction: ${read}): an expired record is not replayed nor refused; the key runs again`, async () => {
        const database = await fresh();
        drop = database.drop;
        node = await startNode(database.url, {
          IDEMPOTENCY_KEY_LIFETIME: 'PT1S',
          IDEMPOTENCY_GRACE_MS: '0',
          IDEMPOTENCY_REPLAY_CACHE_ENTRIES: cache,
          IDEMPOTENCY_READ_BEFORE_TRANSACTION: read,
        });
        const key = newKey();
        const first = await call(node.url, 'POST', '/v1/namespaces', { key, body: { namespace: ['a'] } });
        expect(first.status, first.text).toBe(200);
        const replay = await call(node.url, 'POST', '/v1/namespaces', { key, body: { namespace: ['a'] } });
        expect(replay.headers.get('idempotent-replayed')).toBe('true');
        const reused = await call(node.url, 'POST', '/v1/namespaces', { key, body: { namespace: ['b'] } });
        expect(reused.status).toBe(400);
        await sleep(1_200);
        const other = await call(node.url, 'POST', '/v1/namespaces', { key, body: { namespace: ['b'] } });
        expect(other.status, other.text).toBe(200);
        expect(other.headers.get('idempotent-replayed')).toBeNull();
        const again = await call(node.url, 'POST', '/v1/namespaces', { key, body: { namespace: ['b'] } });
        expect(again.headers.get('idempotent-replayed')).toBe('true');
      });
