// pnpm bench: @idem/store-redis against the same client doing the least Redis work an idempotency record needs,
// measured in one run.
//
// For each client and 1, 8 and 32 concurrent callers on one client (one connection, as a service would):
// reserve+finalize pairs per second against a raw pair of `SET NX PX` (the reservation) and `SET XX` (the
// answer) of the same size, and replays (reserve of a completed record) against a raw `GET` of it.
//
// The two sides alternate in short blocks (100 ms of one, then 100 ms of the other, for BENCH_SECONDS each), so
// that whatever else runs on this shared machine hits both alike: measuring them in turns seconds apart moved the
// ratio by ±30 %. (Mixing both in the same loops would be steadier still, but each side would then wait in the
// other's queue, which hides the difference.) A block's rate counts the time until its last call returned.
import { randomUUID } from 'node:crypto';
import type { IdempotencyStore } from '@idem/core';
import { Cluster, Redis } from 'ioredis';
import { createClient, createCluster } from 'redis';
import { v7 } from 'uuid';
import { machine, perSecond, printTable, ratio } from '../../../scripts/bench.js';
import { createRedisStore } from '../src/index.js';

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const CLUSTER_NODES = (process.env.REDIS_CLUSTER_NODES ?? '127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003')
  .split(',')
  .map((address) => ({ host: address.split(':')[0] ?? '127.0.0.1', port: Number(address.split(':')[1]) }));
const SECONDS = Number(process.env.BENCH_SECONDS ?? 3);
const BLOCK_MS = 100;
const BODY = Buffer.alloc(200, 'x');
const RESPONSE = { status: 201, headers: { 'content-type': 'application/json' }, body: BODY };
const FINGERPRINT = 'f'.repeat(64);
const nowMs = Date.now();

/** The raw commands of the baseline, on the same client as the store. */
interface Raw {
  setNxPx(key: string, value: string, ms: number): Promise<unknown>;
  setXx(key: string, value: Buffer): Promise<unknown>;
  get(key: string): Promise<unknown>;
}

interface Target {
  name: string;
  client: object;
  raw: Raw;
  close(): Promise<void>;
}

/** Alternate `a` and `b` in blocks of BLOCK_MS on `callers` loops until each ran `seconds`; the rate of each. */
async function alternating(
  callers: number,
  seconds: number,
  a: () => Promise<void>,
  b: () => Promise<void>,
): Promise<[number, number]> {
  const elapsedMs = [0, 0];
  const done = [0, 0];
  const block = async (side: 0 | 1) => {
    const start = performance.now();
    const deadline = start + BLOCK_MS;
    const run = side === 0 ? a : b;
    await Promise.all(
      Array.from({ length: callers }, async () => {
        while (performance.now() < deadline) {
          await run();
          done[side] = (done[side] as number) + 1;
        }
      }),
    );
    elapsedMs[side] = (elapsedMs[side] as number) + performance.now() - start;
  };
  for (let i = 0; i < (seconds * 1_000) / BLOCK_MS; i++) {
    // Which side goes first alternates too, so that neither always follows the other.
    await block(i % 2 === 0 ? 0 : 1);
    await block(i % 2 === 0 ? 1 : 0);
  }
  const rate = (side: 0 | 1) => ((done[side] as number) * 1_000) / (elapsedMs[side] as number);
  return [rate(0), rate(1)];
}

/**
 * Redis's own time (INFO commandstats, microseconds) per call of `run`, over 5,000 calls from 8 callers, and the
 * commands those calls sent (`evalsha×1 get×1` per call), from a connection of its own.
 */
async function serverTimePerCall(run: () => Promise<void>): Promise<{ usec: number; calls: string }> {
  const admin = new Redis(REDIS_URL);
  const CALLS = 5_000;
  const stats = async () => {
    const text = await admin.info('commandstats');
    const found = new Map<string, { calls: number; usec: number }>();
    for (const match of text.matchAll(/^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/gm)) {
      found.set(match[1] as string, { calls: Number(match[2]), usec: Number(match[3]) });
    }
    return found;
  };
  const before = await stats();
  let started = 0;
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      while (started++ < CALLS) await run();
    }),
  );
  const after = await stats();
  await admin.quit();
  let usec = 0;
  const calls: string[] = [];
  for (const [name, { calls: n, usec: u }] of after) {
    if (name === 'info') continue;
    const was = before.get(name) ?? { calls: 0, usec: 0 };
    if (n - was.calls === 0) continue;
    usec += u - was.usec;
    calls.push(`${name}×${((n - was.calls) / CALLS).toFixed(2)}`);
  }
  return { usec: usec / CALLS, calls: calls.join(' ') };
}

const storePair = (store: IdempotencyStore) => async () => {
  const ref = { scope: 'bench', key: v7() };
  const owner = randomUUID();
  const reserved = await store.reserve({
    ...ref,
    fingerprint: FINGERPRINT,
    owner,
    nowMs,
    leaseUntilMs: nowMs + 30_000,
    expiresAtMs: nowMs + 600_000,
  });
  if (reserved.outcome !== 'reserved') throw new Error('not reserved');
  if (!(await store.finalize({ ...ref, owner, response: RESPONSE, nowMs }))) throw new Error('finalize lost');
};

// The least a reservation and an answer take: a SET NX with an expiry (in-flight marker with the owner and the
// fingerprint), then a SET XX of the answer (the body plus a few fields), under a key of the same shape.
const rawPair = (raw: Raw) => async () => {
  const key = `idem-bench-raw:{bench:${v7()}}`;
  await raw.setNxPx(key, `${FINGERPRINT}${randomUUID()}`, 600_000);
  await raw.setXx(key, BODY);
};

/** A target on ioredis: a client or a cluster, the same commands either way. */
const ioredisTarget = (name: string, client: Redis | Cluster): Target => ({
  name,
  client,
  raw: {
    setNxPx: (k, v, ms) => client.set(k, v, 'PX', ms, 'NX'),
    setXx: (k, v) => client.set(k, v, 'KEEPTTL', 'XX'),
    get: (k) => client.getBuffer(k),
  },
  close: async () => void (await client.quit()),
});

/** A target on node-redis: a client or a cluster, connected. */
async function nodeRedisTarget(
  name: string,
  client: ReturnType<typeof createClient> | ReturnType<typeof createCluster>,
): Promise<Target> {
  await client.connect();
  return {
    name,
    client,
    raw: {
      setNxPx: (k, v, ms) => client.set(k, v, { PX: ms, NX: true }),
      setXx: (k, v) => client.set(k, v, { KEEPTTL: true, XX: true }),
      get: (k) => client.get(k),
    },
    close: async () => client.destroy(),
  };
}

async function targets(chosen: string[]): Promise<Target[]> {
  const list: Target[] = [];
  if (chosen.includes('ioredis')) list.push(ioredisTarget('ioredis', new Redis(REDIS_URL)));
  if (chosen.includes('node-redis')) {
    list.push(await nodeRedisTarget('node-redis', createClient({ url: REDIS_URL })));
  }
  if (chosen.includes('ioredis-cluster')) {
    list.push(ioredisTarget('ioredis Cluster (3 masters)', new Cluster(CLUSTER_NODES)));
  }
  if (chosen.includes('node-redis-cluster')) {
    const rootNodes = CLUSTER_NODES.map((n) => ({ url: `redis://${n.host}:${n.port}` }));
    list.push(await nodeRedisTarget('node-redis cluster (3 masters)', createCluster({ rootNodes })));
  }
  return list;
}

console.log(`machine: ${machine()}`);
// BENCH_REDIS_CLIENTS=ioredis,node-redis,ioredis-cluster,node-redis-cluster picks a subset.
const chosen = (
  process.env.BENCH_REDIS_CLIENTS ?? 'ioredis,node-redis,ioredis-cluster,node-redis-cluster'
).split(',');
const rows: [string, string][] = [];
const serverRows: [string, string][] = [];
for (const target of await targets(chosen)) {
  const prefix = `idem-bench:${randomUUID().slice(0, 8)}:`;
  const store = createRedisStore(target.client, { prefix });
  // A completed record to replay, and the raw value a replay would at least have to GET.
  const ref = { scope: 'bench', key: v7() };
  const owner = randomUUID();
  await store.reserve({
    ...ref,
    fingerprint: FINGERPRINT,
    owner,
    nowMs,
    leaseUntilMs: nowMs + 1,
    expiresAtMs: nowMs + 600_000,
  });
  await store.finalize({ ...ref, owner, response: RESPONSE, nowMs });
  const rawKey = `idem-bench-raw:{replay:${v7()}}`;
  await target.raw.setNxPx(rawKey, BODY.toString(), 600_000);
  const replay = async () => {
    const result = await store.reserve({
      ...ref,
      fingerprint: FINGERPRINT,
      owner: randomUUID(),
      nowMs,
      leaseUntilMs: nowMs,
      expiresAtMs: nowMs,
    });
    if (result.outcome !== 'exists' || result.record.response === null) throw new Error('no replay');
  };
  const rawGet = async () => {
    if ((await target.raw.get(rawKey)) === null) throw new Error('no value');
  };
  await alternating(8, 0.5, storePair(store), rawPair(target.raw)); // warm-up: connections, script cache
  for (const callers of [1, 8, 32]) {
    const [pairs, raw] = await alternating(callers, SECONDS, storePair(store), rawPair(target.raw));
    const [replays, gets] = await alternating(callers, SECONDS, replay, rawGet);
    const label = `${target.name}, ${callers} caller${callers > 1 ? 's' : ''}`;
    rows.push([
      `${label}: pairs`,
      `${perSecond(pairs)} reserve+finalize vs ${perSecond(raw)} SET NX PX + SET XX = ${ratio(pairs / raw)}`,
    ]);
    rows.push([
      `${label}: replays`,
      `${perSecond(replays)} vs ${perSecond(gets)} GET = ${ratio(replays / gets)}`,
    ]);
  }
  // On one server (not a cluster, whose time is spread over its masters): what Redis itself spends per pair.
  if (!target.name.includes('luster')) {
    const [store1, raw1] = [
      await serverTimePerCall(storePair(store)),
      await serverTimePerCall(rawPair(target.raw)),
    ];
    serverRows.push([
      target.name,
      `store ${store1.usec.toFixed(1)} µs (${store1.calls}) vs raw ${raw1.usec.toFixed(1)} µs (${raw1.calls}): ` +
        `${(store1.usec - raw1.usec).toFixed(1)} µs more on the server`,
    ]);
  }
  await target.close();
}
printTable('@idem/store-redis against the raw minimum on the same client (expired keys left to Redis)', rows);
if (serverRows.length > 0)
  printTable(
    "Redis's own time per pair (INFO commandstats over 5,000 pairs from 8 callers): the store's script and calls against SET NX PX + SET XX",
    serverRows,
  );
