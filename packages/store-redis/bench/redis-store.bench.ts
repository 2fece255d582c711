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
import { createHash, randomUUID } from 'node:crypto';
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
  /** EVALSHA of FENCE (EVAL where the node does not hold it yet): the answer, written only by the owner. */
  fence(key: string, owner: string, value: Buffer): Promise<unknown>;
}

/**
 * The least a fenced answer takes on Redis 7.0, which has no compare-and-set command: a script that reads the
 * value, checks that it starts with the owner, and writes the answer. The second baseline: a raw pair with the
 * server-side cost of fencing added, to tell that cost from the store's own.
 */
const FENCE = `local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, #ARGV[1]) == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2], 'KEEPTTL')
  return 1
end
return 0`;
const FENCE_SHA = createHash('sha1').update(FENCE).digest('hex');
const isNoScript = (error: unknown) => error instanceof Error && error.message.startsWith('NOSCRIPT');

interface Target {
  name: string;
  client: object;
  raw: Raw;
  close(): Promise<void>;
}

/**
 * Alternate `a` and `b` in blocks of BLOCK_MS on `callers` loops until each ran `seconds`: the rate of each, and
 * this process's CPU time (user + system, µs) per operation of each.
 */
async function alternating(
  callers: number,
  seconds: number,
  a: () => Promise<void>,
  b: () => Promise<void>,
): Promise<[number, number, number, number]> {
  const elapsedMs = [0, 0];
  const done = [0, 0];
  const cpuUs = [0, 0];
  const block = async (side: 0 | 1) => {
    const start = performance.now();
    const cpuBefore = process.cpuUsage();
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
    const cpu = process.cpuUsage(cpuBefore);
    cpuUs[side] = (cpuUs[side] as number) + cpu.user + cpu.system;
  };
  for (let i = 0; i < (seconds * 1_000) / BLOCK_MS; i++) {
    // Which side goes first alternates too, so that neither always follows the other.
    await block(i % 2 === 0 ? 0 : 1);
    await block(i % 2 === 0 ? 1 : 0);
  }
  const rate = (side: 0 | 1) => ((done[side] as number) * 1_000) / (elapsedMs[side] as number);
  const cpu = (side: 0 | 1) => (cpuUs[side] as number) / (done[side] as number);
  return [rate(0), rate(1), cpu(0), cpu(1)];
}

/** INFO commandstats of one server: calls and microseconds by command. */
async function commandStats(admin: Redis): Promise<Map<string, { calls: number; usec: number }>> {
  const text = await admin.info('commandstats');
  const found = new Map<string, { calls: number; usec: number }>();
  for (const match of text.matchAll(/^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/gm)) {
    found.set(match[1] as string, { calls: Number(match[2]), usec: Number(match[3]) });
  }
  return found;
}

/** What a step cost the server, per call: each command's calls and usec_per_call, and the top-level total. */
interface StepCost {
  /** µs per call of the commands the client sent (an EVALSHA's own time includes its script's commands). */
  usec: number;
  /** `set×1 1.2µs`, `evalsha×1 5.1µs (inside: get×1 0.6µs set×1 1.3µs)`. */
  detail: string;
}

/**
 * Redis's own time (INFO commandstats) per call of `step`, over CALLS calls from 8 callers, from a connection of
 * its own. Commands a script runs are counted by Redis both on their own line and inside the script's
 * EVALSHA time, so `topLevel` names the commands the client sent; the others are shown as the script's inside.
 * Commands run less than once per two steps are left out: they are other clients' on a shared server.
 */
async function serverTime(
  step: (i: number) => Promise<void>,
  calls: number,
  topLevel: readonly string[],
): Promise<StepCost> {
  const admin = new Redis(REDIS_URL);
  const before = await commandStats(admin);
  let started = 0;
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      while (started < calls) await step(started++);
    }),
  );
  const after = await commandStats(admin);
  await admin.quit();
  let usec = 0;
  const outer: string[] = [];
  const inner: string[] = [];
  for (const [name, { calls: n, usec: u }] of after) {
    const was = before.get(name) ?? { calls: 0, usec: 0 };
    // Fewer than one call in two is not the step's (other clients of a shared server: SCAN, HELLO …).
    if (name === 'info' || (n - was.calls) / calls < 0.5) continue;
    const text = `${name}×${((n - was.calls) / calls).toFixed(2)} ${((u - was.usec) / (n - was.calls)).toFixed(1)}µs`;
    if (topLevel.includes(name)) {
      usec += u - was.usec;
      outer.push(text);
    } else inner.push(text);
  }
  return {
    usec: usec / calls,
    detail: `${outer.join(' ')}${inner.length > 0 ? ` (inside: ${inner.join(' ')})` : ''}`,
  };
}

/**
 * The server time of a pair, its two steps measured apart (CALLS first steps, then their CALLS second steps), so
 * that a SET of the first is never mistaken for a SET inside the script of the second.
 */
async function pairServerTime(
  first: (i: number) => Promise<void>,
  second: (i: number) => Promise<void>,
  topLevel: readonly [readonly string[], readonly string[]],
): Promise<{ usec: number; detail: string }> {
  const CALLS = 5_000;
  const a = await serverTime(first, CALLS, topLevel[0]);
  const b = await serverTime(second, CALLS, topLevel[1]);
  return { usec: a.usec + b.usec, detail: `${a.detail}; ${b.detail}` };
}

// The store's parameters are built as core builds them (`reserveParams`, execution.ts): one object literal with
// every field. An object spread followed by more fields (`{ ...ref, owner, nowMs }`) costs Node 20's V8 about a
// microsecond per field after the spread, and leaves garbage that reaches the old generation: written that way,
// the bench charged the store 10-15 µs of CPU per pair that no caller of it pays (docs/benchmarks.md).

/** What core passes to `reserve` for a fresh key. */
const reserveParams = (
  key: string,
  owner: string,
  leaseUntilMs = nowMs + 30_000,
  expiresAtMs = nowMs + 600_000,
) => ({
  scope: 'bench',
  key,
  fingerprint: FINGERPRINT,
  owner,
  nowMs,
  leaseUntilMs,
  expiresAtMs,
});

/** What core passes to `finalize`. */
const finalizeParams = (key: string, owner: string) => ({
  scope: 'bench',
  key,
  owner,
  response: RESPONSE,
  nowMs,
});

/** A reservation and its answer through the store, in two steps (for the server time, measured apart). */
const storeSteps = (store: IdempotencyStore) => {
  const refs: { key: string; owner: string }[] = [];
  return {
    async reserve(i: number) {
      const ref = { key: v7(), owner: randomUUID() };
      refs[i] = ref;
      const reserved = await store.reserve(reserveParams(ref.key, ref.owner));
      if (reserved.outcome !== 'reserved') throw new Error('not reserved');
    },
    async finalize(i: number) {
      const { key, owner } = refs[i] as { key: string; owner: string };
      if (!(await store.finalize(finalizeParams(key, owner)))) throw new Error('finalize lost');
    },
  };
};

const storePair = (store: IdempotencyStore) => async () => {
  const key = v7();
  const owner = randomUUID();
  const reserved = await store.reserve(reserveParams(key, owner));
  if (reserved.outcome !== 'reserved') throw new Error('not reserved');
  if (!(await store.finalize(finalizeParams(key, owner)))) throw new Error('finalize lost');
};

// The least a reservation and an answer take: a SET NX with an expiry (in-flight marker with the owner and the
// fingerprint), then a SET XX of the answer (the body plus a few fields), under a key of the same shape. With
// `fenced`, the answer is written by FENCE instead: only while the value still starts with the owner.
const rawSteps = (raw: Raw, fenced: boolean) => {
  const keys: { key: string; owner: string }[] = [];
  return {
    async reserve(i: number) {
      const key = `idem-bench-raw:{bench:${v7()}}`;
      const owner = randomUUID();
      keys[i] = { key, owner };
      await raw.setNxPx(key, `${owner}${FINGERPRINT}`, 600_000);
    },
    async finalize(i: number) {
      const { key, owner } = keys[i] as { key: string; owner: string };
      if (!fenced) await raw.setXx(key, BODY);
      else if ((await raw.fence(key, owner, BODY)) !== 1) throw new Error('fence lost');
    },
  };
};

const rawPair =
  (raw: Raw, fenced = false) =>
  async () => {
    const key = `idem-bench-raw:{bench:${v7()}}`;
    const owner = randomUUID();
    await raw.setNxPx(key, `${owner}${FINGERPRINT}`, 600_000);
    if (!fenced) await raw.setXx(key, BODY);
    else if ((await raw.fence(key, owner, BODY)) !== 1) throw new Error('fence lost');
  };

/** A target on ioredis: a client or a cluster, the same commands either way. */
const ioredisTarget = (name: string, client: Redis | Cluster): Target => ({
  name,
  client,
  raw: {
    setNxPx: (k, v, ms) => client.set(k, v, 'PX', ms, 'NX'),
    setXx: (k, v) => client.set(k, v, 'KEEPTTL', 'XX'),
    get: (k) => client.getBuffer(k),
    async fence(k, owner, v) {
      try {
        return await client.evalsha(FENCE_SHA, 1, k, owner, v);
      } catch (error) {
        if (!isNoScript(error)) throw error;
        return await client.eval(FENCE, 1, k, owner, v);
      }
    },
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
      async fence(k, owner, v) {
        const options = { keys: [k], arguments: [owner, v] };
        try {
          return await client.evalSha(FENCE_SHA, options);
        } catch (error) {
          if (!isNoScript(error)) throw error;
          return await client.eval(FENCE, options);
        }
      },
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
const cpuRows: [string, string][] = [];
for (const target of await targets(chosen)) {
  const prefix = `idem-bench:${randomUUID().slice(0, 8)}:`;
  const store = createRedisStore(target.client, { prefix });
  // A completed record to replay, and the raw value a replay would at least have to GET.
  const replayKey = v7();
  const owner = randomUUID();
  await store.reserve(reserveParams(replayKey, owner, nowMs + 1));
  await store.finalize(finalizeParams(replayKey, owner));
  const rawKey = `idem-bench-raw:{replay:${v7()}}`;
  await target.raw.setNxPx(rawKey, BODY.toString(), 600_000);
  const replay = async () => {
    const result = await store.reserve(reserveParams(replayKey, randomUUID(), nowMs, nowMs));
    if (result.outcome !== 'exists' || result.record.response === null) throw new Error('no replay');
  };
  const rawGet = async () => {
    if ((await target.raw.get(rawKey)) === null) throw new Error('no value');
  };
  await alternating(8, 0.5, storePair(store), rawPair(target.raw)); // warm-up: connections, script cache
  await alternating(8, 0.2, storePair(store), rawPair(target.raw, true));
  for (const callers of [1, 8, 32]) {
    const [pairs, raw, storeCpu, rawCpu] = await alternating(
      callers,
      SECONDS,
      storePair(store),
      rawPair(target.raw),
    );
    const [pairs2, fenced, storeCpu2, fencedCpu] = await alternating(
      callers,
      SECONDS,
      storePair(store),
      rawPair(target.raw, true),
    );
    const [replays, gets] = await alternating(callers, SECONDS, replay, rawGet);
    const label = `${target.name}, ${callers} caller${callers > 1 ? 's' : ''}`;
    rows.push([
      `${label}: pairs`,
      `${perSecond(pairs)} reserve+finalize vs ${perSecond(raw)} SET NX PX + SET XX = ${ratio(pairs / raw)}`,
    ]);
    rows.push([
      `${label}: pairs, fenced raw`,
      `${perSecond(pairs2)} reserve+finalize vs ${perSecond(fenced)} SET NX PX + FENCE = ${ratio(pairs2 / fenced)}`,
    ]);
    rows.push([
      `${label}: replays`,
      `${perSecond(replays)} vs ${perSecond(gets)} GET = ${ratio(replays / gets)}`,
    ]);
    cpuRows.push([
      label,
      `store ${storeCpu.toFixed(0)} / ${storeCpu2.toFixed(0)} µs vs raw ${rawCpu.toFixed(0)} µs, fenced raw ${fencedCpu.toFixed(0)} µs`,
    ]);
  }
  // On one server (not a cluster, whose time is spread over its masters): what Redis itself spends per pair.
  if (!target.name.includes('luster')) {
    const sides = [
      ['store', storeSteps(store), [['set'], ['evalsha']]],
      ['raw', rawSteps(target.raw, false), [['set'], ['set']]],
      ['fenced raw', rawSteps(target.raw, true), [['set'], ['evalsha', 'eval']]],
    ] as const;
    for (const [side, steps, topLevel] of sides) {
      const { usec, detail } = await pairServerTime(steps.reserve, steps.finalize, topLevel);
      serverRows.push([`${target.name}, ${side}`, `${usec.toFixed(1)} µs: ${detail}`]);
    }
  }
  await target.close();
}
printTable('@idem/store-redis against the raw minimum on the same client (expired keys left to Redis)', rows);
printTable(
  "This process's CPU time (user + system) per pair, the same blocks: store (against raw / against fenced raw) and each baseline",
  cpuRows,
);
if (serverRows.length > 0)
  printTable(
    "Redis's own time per pair (INFO commandstats, 5,000 reservations then their 5,000 answers, 8 callers): the commands sent, usec_per_call; an EVALSHA's time includes its script's commands, shown inside",
    serverRows,
  );
