import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { everyDatabase, type FreshDatabase } from './support/databases.js';
import { gate } from './support/gate.js';
import { call, idempotencyRecords, type Node, newKey, startNode } from './support/server.js';

// A keyed mutation whose work is refused (a 409, a 404) rolls its whole transaction back, the key's reservation
// with it, and its refusal is stored afterwards, before it is sent (idempotency/mutate.ts): no savepoint per
// keyed mutation. What that must keep: a refusal goes out only once it is the key's stored answer; a store that
// cannot take it makes the answer a retryable 503 and leaves the key free; a duplicate that waited on the
// rolled-back reservation may run the work itself, and then the key has one answer, which every retry replays.

/** The requests' deadline (REQUEST_TIMEOUT_MS). */
const DEADLINE_MS = 1_500;

describe.each(everyDatabase)('refusals stored after the rollback, on $name', (backend) => {
  let database: FreshDatabase;
  let node: Node;
  let failing = false;
  let slowMs = 0;
  const held = gate();
  let holding = false;
  beforeAll(async () => {
    if (!(await backend.up())) return;
    database = await backend.fresh();
    node = await startNode(
      database.url,
      { REQUEST_TIMEOUT_MS: String(DEADLINE_MS) },
      {
        afterReserve: async () => {
          if (holding) await held.pass();
        },
        beforeStoreCall: async (name) => {
          if (failing && name !== 'load') throw new Error('the store is down (a test fault)');
          if (slowMs > 0 && name !== 'load') await new Promise((resolve) => setTimeout(resolve, slowMs));
        },
      },
    );
  });
  afterAll(async () => {
    await node?.close();
    await database?.drop();
  });

  const create = (namespace: string, key: string) =>
    call(node.url, 'POST', '/v1/namespaces', { key, body: { namespace: [namespace] } });

  test('a refusal is stored under its key and replayed as it was sent', async (context) => {
    if (node === undefined) return context.skip();
    await call(node.url, 'POST', '/v1/namespaces', { body: { namespace: ['taken'] } });
    const key = newKey();
    const first = await create('taken', key);
    expect(first.status).toBe(409);
    expect(first.json().error.type).toBe('AlreadyExistsException');
    expect(await idempotencyRecords(node, key)).toBe(1);
    // Gone now: a retry that ran again would create it. It replays the refusal instead.
    expect((await call(node.url, 'DELETE', '/v1/namespaces/taken')).status).toBe(204);
    const retry = await create('taken', key);
    expect(retry.status).toBe(409);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(retry.text).toBe(first.text);
    expect((await call(node.url, 'HEAD', '/v1/namespaces/taken')).status).toBe(404);
  });

  test('a refusal the store cannot take is a retryable 503, and the key stays free for the retry', async (context) => {
    if (node === undefined) return context.skip();
    await call(node.url, 'POST', '/v1/namespaces', { body: { namespace: ['down'] } });
    const key = newKey();
    failing = true;
    let first: Awaited<ReturnType<typeof create>>;
    try {
      first = await create('down', key);
    } finally {
      failing = false;
    }
    expect(first.status).toBe(503);
    expect(first.headers.get('retry-after')).not.toBeNull();
    expect(await idempotencyRecords(node, key)).toBe(0);
    const retry = await create('down', key);
    expect(retry.status).toBe(409);
    expect(retry.headers.get('idempotent-replayed')).toBeNull();
    expect(await idempotencyRecords(node, key)).toBe(1);
  });

  test('a refusal whose storing outlasts the deadline: a retryable 503 by the deadline, and the retry replays what was stored', async (context) => {
    if (node === undefined) return context.skip();
    await call(node.url, 'POST', '/v1/namespaces', { body: { namespace: ['slow'] } });
    const key = newKey();
    // Each store call after the rollback takes 1.2 s (under the store's own 2 s bound): their sum passes the deadline.
    slowMs = 1_200;
    const started = performance.now();
    let first: Awaited<ReturnType<typeof create>>;
    try {
      first = await create('slow', key);
    } finally {
      slowMs = 0;
    }
    const tookMs = performance.now() - started;
    expect(first.status, first.text).toBe(503);
    expect(first.headers.get('retry-after')).not.toBeNull();
    expect(tookMs).toBeLessThan(DEADLINE_MS + 400);
    // The store calls ran on, and stored the refusal: the retry replays it.
    const until = performance.now() + 5_000;
    while ((await idempotencyRecords(node, key)) === 0 && performance.now() < until)
      await new Promise((resolve) => setTimeout(resolve, 50));
    await new Promise((resolve) => setTimeout(resolve, 1_300));
    const retry = await create('slow', key);
    expect(retry.status, retry.text).toBe(409);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
  });

  test('a duplicate that waited on a reservation rolled back by a refusal: one answer for the key, whoever stored it', async (context) => {
    if (node === undefined) return context.skip();
    await call(node.url, 'POST', '/v1/namespaces', { body: { namespace: ['raced'] } });
    const key = newKey();
    held.close();
    holding = true;
    const first = create('raced', key);
    await held.entered;
    holding = false; // the duplicate passes
    const duplicate = create('raced', key);
    // Time for the duplicate to reach the reservation's row (or, on SQLite, its turn on the one connection).
    await new Promise((resolve) => setTimeout(resolve, 150));
    held.open();
    const answers = await Promise.all([first, duplicate]);
    for (const answer of answers) {
      expect([409, 503]).toContain(answer.status);
      if (answer.status === 503) expect(answer.headers.get('retry-after')).not.toBeNull();
    }
    const refusals = answers.filter((answer) => answer.status === 409);
    expect(refusals.length).toBeGreaterThan(0);
    expect(await idempotencyRecords(node, key)).toBe(1);
    expect((await call(node.url, 'DELETE', '/v1/namespaces/raced')).status).toBe(204);
    const retry = await create('raced', key);
    expect(retry.status).toBe(409);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    for (const refusal of refusals) expect(refusal.text).toBe(retry.text);
  });
});
