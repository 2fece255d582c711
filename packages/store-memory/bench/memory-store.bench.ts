// pnpm bench: @idem/core's coordinator over the memory store, against baselines measured in the same run.
import { randomUUID } from 'node:crypto';
import { createIdempotency } from '@idem/core';
import { createMemoryStore } from '@idem/store-memory';
import { v7 } from 'uuid';
import { machine, measure, perSecond, printTable, ratio } from '../../../scripts/bench.js';

const store = createMemoryStore({ maxEntries: 100_000, sweepIntervalMs: false });
const idem = createIdempotency({ store }); // defaults: heartbeat on, 2 s store timeout
const body = { item: 'book', quantity: 1, note: 'x'.repeat(200) };
const response = { status: 201, headers: { 'content-type': 'application/json' }, body: '{"id":1}' };
// A no-op handler that still does what every handler does: produce the response.
const handler = async () => response;

// A fresh UUIDv7, as a client mints one: unique, and valid for the default key format.
const keyOf = () => v7();
// Replays get a store of their own, so that the write-heavy tasks cannot evict the record they replay.
const replayStore = createMemoryStore({ sweepIntervalMs: false });
const replayIdem = createIdempotency({ store: replayStore, heartbeatIntervalMs: false });
const replayKey = keyOf();
{
  const first = await replayIdem.begin({ method: 'POST', route: '/orders', body, key: replayKey });
  if (first.action !== 'execute') throw new Error('setup failed');
  await first.execution.finish(response);
}

const nowMs = Date.now();
const results = await measure({
  'handler called directly': async () => {
    keyOf();
    await handler();
  },
  'handler through the coordinator': async () => {
    const result = await idem.begin({ method: 'POST', route: '/orders', body, key: keyOf() });
    if (result.action !== 'execute') throw new Error(`expected execute, got ${result.action}`);
    await result.execution.finish(await handler());
  },
  'store reserve+finalize pair': async () => {
    const key = v7();
    const owner = randomUUID();
    await store.reserve({
      scope: '',
      key,
      fingerprint: 'f',
      owner,
      nowMs,
      leaseUntilMs: nowMs + 1,
      expiresAtMs: nowMs + 2,
    });
    await store.finalize({
      scope: '',
      key,
      owner,
      nowMs,
      response: { status: 201, headers: {}, body: null },
    });
  },
  'replay through the coordinator': async () => {
    const result = await replayIdem.begin({ method: 'POST', route: '/orders', body, key: replayKey });
    if (result.action !== 'replay') throw new Error(`expected replay, got ${result.action}`);
  },
});

const direct = results['handler called directly'] as number;
const coordinated = results['handler through the coordinator'] as number;
console.log(`machine: ${machine()}`);
printTable('@idem/core + @idem/store-memory', [
  ['store reserve+finalize pairs', perSecond(results['store reserve+finalize pair'] as number)],
  ['coordinator begin+finish (new key)', perSecond(coordinated)],
  ['coordinator replays', perSecond(results['replay through the coordinator'] as number)],
  ['no-op handler called directly', perSecond(direct)],
  ['coordinator throughput / direct', ratio(coordinated / direct)],
  ['coordinator cost per request', `${((1 / coordinated - 1 / direct) * 1e6).toFixed(1)} µs`],
]);
await store.close();
await replayStore.close();
