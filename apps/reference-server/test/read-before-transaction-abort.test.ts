import { afterEach, expect, test } from 'vitest';
import { call, type Node, newKey, startNode } from './support/server.js';

// A client that leaves while the read before the transaction waits for SQLite's connection: nothing runs and
// nothing is kept, and its retry runs once.

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
let node: Node | undefined;
afterEach(async () => {
  await node?.close();
  node = undefined;
});

test('SQLite: a client that leaves while the read before the transaction waits: nothing runs, nothing kept', async () => {
  node = await startNode('sqlite::memory:');
  const holding = node.db.transaction(async () => {
    await sleep(800);
  });
  await sleep(20);
  const key = newKey();
  const controller = new AbortController();
  const left = fetch(`${node.url}/v1/namespaces`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': key },
    body: JSON.stringify({ namespace: ['left'] }),
    signal: controller.signal,
  }).catch((error: unknown) => error);
  await sleep(200);
  controller.abort();
  await left;
  await holding;
  await sleep(2_500);
  expect((await call(node.url, 'HEAD', '/v1/namespaces/left')).status).toBe(404);
  // The retry with the same key runs once.
  const retry = await call(node.url, 'POST', '/v1/namespaces', { key, body: { namespace: ['left'] } });
  expect(retry.status, retry.text).toBe(200);
  expect(retry.headers.get('idempotent-replayed')).toBeNull();
});
