// pnpm bench: @idem/core's coordinator over the memory store, against baselines measured in the same run.
import { createHash, randomUUID } from 'node:crypto';
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

// The floor: what a minimal hand-written idempotency check costs. The key checked by a regex, a SHA-256 of
// method, route and canonical body, a Map reserve (bounded like the store) and a finalize. No timeouts,
// leases, owners, events or replays: what idem adds over this is what the ratio below shows.
const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/i;
const floorRecords = new Map<string, { fingerprint: string; response: typeof response | null }>();
async function handWritten(key: string) {
  if (!UUID_V7.test(key)) throw new Error('invalid key');
  const fingerprint = createHash('sha256')
    .update(`POST\n/orders\n${JSON.stringify(body, Object.keys(body).sort())}`)
    .digest('base64url');
  const existing = floorRecords.get(key);
  if (existing !== undefined) return existing.response;
  const record = { fingerprint, response: null as typeof response | null };
  floorRecords.set(key, record);
  if (floorRecords.size > 100_000) floorRecords.delete(floorRecords.keys().next().value as string);
  record.response = await handler();
  return record.response;
}

// Each task runs a batch, so that the harness's own cost per iteration (two clock reads, a promise) does
// not flatten the ratios.
const BATCH = 100;
const batched = (task: () => Promise<unknown>) => async () => {
  for (let i = 0; i < BATCH; i++) await task();
};

const nowMs = Date.now();
const batches = await measure({
  'hand-written floor': batched(() => handWritten(keyOf())),
  'handler called directly': batched(async () => {
    keyOf();
    await handler();
  }),
  'handler through the coordinator': batched(async () => {
    const result = await idem.begin({ method: 'POST', route: '/orders', body, key: keyOf() });
    if (result.action !== 'execute') throw new Error(`expected execute, got ${result.action}`);
    await result.execution.finish(await handler());
  }),
  'store reserve+finalize pair': batched(async () => {
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
  }),
  'replay through the coordinator': batched(async () => {
    const result = await replayIdem.begin({ method: 'POST', route: '/orders', body, key: replayKey });
    if (result.action !== 'replay') throw new Error(`expected replay, got ${result.action}`);
  }),
});
const results = Object.fromEntries(Object.entries(batches).map(([name, ops]) => [name, ops * BATCH]));

const direct = results['handler called directly'] as number;
const coordinated = results['handler through the coordinator'] as number;
const floor = results['hand-written floor'] as number;
console.log(`machine: ${machine()}`);
printTable('@idem/core + @idem/store-memory', [
  ['store reserve+finalize pairs', perSecond(results['store reserve+finalize pair'] as number)],
  ['coordinator begin+finish (new key)', perSecond(coordinated)],
  ['coordinator replays', perSecond(results['replay through the coordinator'] as number)],
  ['no-op handler called directly', perSecond(direct)],
  ['coordinator throughput / direct', ratio(coordinated / direct)],
  ['coordinator cost per request', `${((1 / coordinated - 1 / direct) * 1e6).toFixed(1)} µs`],
  ['hand-written floor (new key)', perSecond(floor)],
  ['time per request: coordinator / floor', ratio(floor / coordinated)],
]);
await store.close();
await replayStore.close();
