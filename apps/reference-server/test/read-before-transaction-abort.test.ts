import { afterEach, expect, test } from 'vitest';
import { call, type Node, newKey, startNode } from './support/server.js';

// A client that leaves while its keyed mutation waits for SQLite's connection. Waiting in the read before the
// transaction (IDEMPOTENCY_READ_BEFORE_TRANSACTION), nothing runs and nothing is kept, and its retry runs once.
// Waiting for the transaction's turn, the mutation has begun: it runs once when its turn comes, its answer is
// kept with it, and the retry replays that answer. Either way the mutation runs once.

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
let node: Node | undefined;
afterEach(async () => {
  await node?.close();
  node = undefined;
});

for (const read of [true, false])
  test(`SQLite (read before the transaction: ${read}): a client that leaves while its mutation waits, then its retry: one run`, async () => {
    node = await startNode('sqlite::memory:', { IDEMPOTENCY_READ_BEFORE_TRANSACTION: String(read) });
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
    expect((await call(node.url, 'HEAD', '/v1/namespaces/left')).status).toBe(read ? 404 : 204);
    const retry = await call(node.url, 'POST', '/v1/namespaces', { key, body: { namespace: ['left'] } });
    expect(retry.status, retry.text).toBe(200);
    expect(retry.headers.get('idempotent-replayed')).toBe(read ? null : 'true');
    expect(retry.json().namespace).toEqual(['left']);
  });
