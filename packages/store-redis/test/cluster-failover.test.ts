import { randomUUID } from 'node:crypto';
import { createIdempotency, type FinishOutcome } from '@idem/core';
import { createRedisStore, recordKey } from '@idem/store-redis';
import { Cluster } from 'ioredis';
import { createCluster } from 'redis';
import { v7 } from 'uuid';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { type FailoverCluster, keySlot, NODE_TIMEOUT_MS, startFailoverCluster } from './failover-cluster.js';
import { redisServerInstalled, sleep, until } from './support/private-servers.js';

/**
 * A master of a 3 + 3 Redis Cluster failed over under keyed load: gracefully (`CLUSTER FAILOVER` on its
 * replica), the hard way (`kill -9`, its replica elected after the node timeout), and after its replica was cut
 * off for a moment (a partition between them, then `kill -9`), each with and without the store's `replicas`
 * (`WAIT`) option, on both cluster clients. The killed node is started again at once, as a supervisor would; it
 * rejoins as the new master's replica. Every key is sent by two concurrent copies, each retried after a 503 or
 * a 409 until it is answered, sent again later (a client that lost its answer), and once more when the cluster
 * is whole again. Counted per run: handler runs beyond the first (duplicates), answers the store acknowledged
 * (finalize returned `finalized`) that later vanished (losses), runs that started while an earlier run of the
 * key was still going (its reservation vanished), and replays unlike the key's first answer (wrong answers).
 */

const installed = await redisServerInstalled();

const CONCURRENCY = 16;
const BEFORE_FAULT_MS = 1_000; // load before the fault
const AFTER_HEAL_MS = 1_500; // load once the cluster is whole again
const LEASE_MS = 1_500; // short, so that a key left in flight by a failed finalize is taken over within the run
const WAIT = { count: 1, timeoutMs: 500 } as const;

type Mode = 'CLUSTER FAILOVER' | 'kill -9' | 'replica cut off, then kill -9';
/** How long the master answers writes its replica no longer gets, before it is killed. */
const CUT_MS = 300;

interface KeyLog {
  /** The body of each handler run, in order. */
  readonly runs: string[];
  /** Whether the store acknowledged each run's answer (finalize returned `finalized`). */
  readonly acknowledged: boolean[];
  /** The first answer any copy of the key received. */
  first?: string;
}

interface Figures {
  client: Kind;
  mode: Mode;
  wait: boolean;
  keys: number;
  sends: number;
  requests: number;
  answered503: number;
  answered409: number;
  duplicates: number;
  /** Duplicates whose earlier run's answer the store had not acknowledged (finalize failed or lost its lease). */
  duplicatesAfterUnacknowledged: number;
  /** Duplicates that ran while an earlier run of the key was still going: its reservation had vanished. */
  lostReservations: number;
  losses: number;
  wrongAnswers: number;
  /** Replays whose body is no run of their key at all (corruption, another key's answer): never. */
  foreignAnswers: number;
  unacknowledgedAnswers: number;
  /** From the failover (the `CLUSTER FAILOVER` or the `kill -9`) until the replica reported itself master. */
  promotedAfterMs: number;
  /** From the fault until the cluster was whole again (for kill -9: the killed node back as a replica). */
  healedAfterMs: number;
  /** From the failover until the first answer the store acknowledged to a request sent after it. */
  writesBackAfterMs: number;
  elapsedMs: number;
}

const figures: Figures[] = [];

type Kind = 'ioredis Cluster' | 'node-redis cluster';

async function openCluster(kind: Kind, nodes: { host: string; port: number }[]) {
  if (kind === 'ioredis Cluster') {
    const client = new Cluster(nodes);
    client.on('error', () => {}); // reported through the failing calls
    await new Promise((resolve) => client.once('ready', resolve));
    return { client, close: async () => client.disconnect() };
  }
  const client = createCluster({
    rootNodes: nodes.map(({ host, port }) => ({ url: `redis://${host}:${port}` })),
  });
  client.on('error', () => {});
  await client.connect();
  return { client, close: async () => client.destroy() };
}

async function scenario(cluster: FailoverCluster, kind: Kind, mode: Mode, wait: boolean): Promise<Figures> {
  const started = performance.now();
  const prefix = `failover:${randomUUID()}:`;
  // Every key on the victim's slots: pick a slot, then keys whose record lands on that master.
  const probeKey = recordKey(prefix, '', v7());
  const { master: victim, replica } = await cluster.pair(keySlot(probeKey));
  const victimSlots = victim.slots;
  const onVictim = (key: string) => {
    const slot = keySlot(recordKey(prefix, '', key));
    return victimSlots.some(([from, to]) => slot >= from && slot <= to);
  };
  const newKey = () => {
    for (;;) {
      const key = v7();
      if (onVictim(key)) return key;
    }
  };

  const { client, close } = await openCluster(kind, cluster.nodes);
  const store = createRedisStore(client, { prefix, ...(wait ? { replicas: WAIT } : {}) });
  const storeErrors = new Map<string, number>();
  const idem = createIdempotency({
    store,
    storeTimeoutMs: 1_000,
    leaseMs: LEASE_MS,
    onEvent: (event) => {
      if (event.type !== 'store-error') return;
      // The message without its numbers and key: what failed, grouped.
      const text = `${event.operation}: ${String((event.error as Error)?.message ?? event.error)}`
        .replace(/\d+/g, 'N')
        .slice(0, 120);
      storeErrors.set(text, (storeErrors.get(text) ?? 0) + 1);
    },
  });
  const logs = new Map<string, KeyLog>();
  const lost = new Set<string>();
  const f: Figures = {
    client: kind,
    mode,
    wait,
    keys: 0,
    sends: 0,
    requests: 0,
    answered503: 0,
    answered409: 0,
    duplicates: 0,
    duplicatesAfterUnacknowledged: 0,
    lostReservations: 0,
    losses: 0,
    wrongAnswers: 0,
    foreignAnswers: 0,
    unacknowledgedAnswers: 0,
    promotedAfterMs: 0,
    healedAfterMs: 0,
    writesBackAfterMs: -1,
    elapsedMs: 0,
  };
  let faultAt = Number.POSITIVE_INFINITY;

  /** One send of `key`: retried after 503 and 409, as a client would, until it is answered. */
  async function send(key: string): Promise<void> {
    f.sends++;
    const log = logs.get(key) as KeyLog;
    const deadline = Date.now() + 30_000;
    for (;;) {
      if (Date.now() > deadline) {
        throw new Error(
          `key ${key} was not answered within 30 s (${JSON.stringify(f)}; store errors: ${JSON.stringify(Object.fromEntries(storeErrors))})`,
        );
      }
      f.requests++;
      const sentAt = performance.now();
      const result = await idem.begin({
        method: 'POST',
        route: '/orders',
        path: '/orders',
        body: { key },
        key,
      });
      if (result.action === 'execute') {
        if (log.runs.length > 0) {
          f.duplicates++;
          if (log.runs.length > log.acknowledged.length)
            f.lostReservations++; // a run still going lost its key
          else if (log.acknowledged.includes(true))
            lost.add(key); // an acknowledged answer vanished
          else f.duplicatesAfterUnacknowledged++;
        }
        const body = `order ${key} run ${log.runs.length + 1}`;
        log.runs.push(body);
        await sleep(2); // the work
        const outcome: FinishOutcome = await result.execution.finish({ status: 201, headers: {}, body });
        const acknowledged = outcome === 'finalized';
        log.acknowledged.push(acknowledged);
        if (!acknowledged) f.unacknowledgedAnswers++;
        if (acknowledged && sentAt > faultAt && f.writesBackAfterMs < 0) {
          f.writesBackAfterMs = Math.round(performance.now() - faultAt);
        }
        log.first ??= body; // the answer goes out whatever finish says
        return;
      }
      if (result.action === 'replay') {
        const body = new TextDecoder().decode(result.response.body ?? new Uint8Array());
        log.first ??= body;
        if (body !== log.first) f.wrongAnswers++;
        if (!log.runs.includes(body)) f.foreignAnswers++;
        return;
      }
      if (result.action !== 'reject') throw new Error(`unexpected ${result.action}`);
      if (result.error.status === 503) f.answered503++;
      else if (result.error.status === 409) f.answered409++;
      else throw new Error(`unexpected ${result.error.status} ${result.error.code}`);
      await sleep(50);
    }
  }

  /** A new key: two copies at once (a retry sent before the first answer, or two nodes), then one later. */
  const answered: string[] = [];
  async function fresh(): Promise<void> {
    const key = newKey();
    logs.set(key, { runs: [], acknowledged: [] });
    f.keys++;
    await Promise.all([send(key), send(key)]);
    answered.push(key);
  }

  let loading = true;
  const worker = async () => {
    while (loading) {
      // Half new keys, half a key answered recently sent again (its client lost the answer).
      const recent = answered.length > 0 && Math.random() < 0.5;
      if (recent) {
        const from = Math.max(0, answered.length - 400);
        await send(answered[from + Math.floor(Math.random() * (answered.length - from))] as string);
      } else {
        await fresh();
      }
    }
  };
  const workers = Array.from({ length: CONCURRENCY }, worker);

  // The fault, then load until the cluster is whole again; the workers stop whatever happens.
  const faulted = (async () => {
    await sleep(BEFORE_FAULT_MS);
    if (mode === 'replica cut off, then kill -9') {
      const heal = await cluster.cutReplica(victim.port, replica.port);
      try {
        await sleep(CUT_MS);
        faultAt = performance.now();
        cluster.kill(victim.port);
      } finally {
        heal();
      }
    } else {
      faultAt = performance.now();
      if (mode === 'kill -9') cluster.kill(victim.port);
      else await cluster.failover(replica.port);
    }
    await cluster.promoted(replica.port);
    f.promotedAfterMs = Math.round(performance.now() - faultAt);
    if (mode !== 'CLUSTER FAILOVER') await cluster.restart(); // as a supervisor would: it rejoins as the new replica
    await until('the cluster to be whole again', cluster.healthy, 30_000);
    f.healedAfterMs = Math.round(performance.now() - faultAt);
    await sleep(AFTER_HEAL_MS);
  })();
  const [fault, ...loads] = await Promise.allSettled([
    faulted.finally(() => {
      loading = false;
    }),
    ...workers,
  ]);
  const failure = [fault, ...loads].find((r) => r.status === 'rejected');
  if (failure !== undefined) {
    await close();
    throw failure.reason;
  }

  try {
    // Every key once more, now that the cluster is whole; then what the store holds.
    const keys = [...logs.keys()];
    for (let i = 0; i < keys.length; i += CONCURRENCY * 4) {
      await Promise.all(keys.slice(i, i + CONCURRENCY * 4).map((key) => send(key)));
    }
    for (const key of keys) {
      const log = logs.get(key) as KeyLog;
      const acknowledgedAt = log.acknowledged.indexOf(true);
      if (acknowledgedAt === -1) continue;
      const record = await store.load({ scope: '', key });
      const body = record?.response?.body ? new TextDecoder().decode(record.response.body) : undefined;
      if (body !== log.runs[acknowledgedAt]) lost.add(key);
    }
  } finally {
    await close();
  }
  f.losses = lost.size;
  f.elapsedMs = Math.round(performance.now() - started);
  figures.push(f);
  console.log(`failover ${kind}, ${mode}, WAIT ${wait ? 'on' : 'off'}: ${JSON.stringify(f)}`);
  console.log(`  store errors: ${JSON.stringify(Object.fromEntries(storeErrors))}`);
  return f;
}

describe.runIf(installed)('Redis Cluster 3 + 3: a master failed over under keyed load', () => {
  let cluster: FailoverCluster;
  beforeAll(async () => {
    cluster = await startFailoverCluster();
  }, 60_000);
  afterAll(async () => {
    await cluster?.stop();
    if (figures.length > 0) console.table(figures);
  });

  test('the slot of a key is the one Redis computes', async () => {
    const { Redis } = await import('ioredis');
    const node = new Redis(cluster.nodes[0] as { port: number });
    try {
      for (const key of [recordKey('idem:', '', v7()), recordKey('p:', 's', 'k'), 'plain', '{}x', 'a{b}c']) {
        expect(keySlot(key)).toBe(Number(await node.cluster('KEYSLOT', key)));
      }
    } finally {
      node.disconnect();
    }
  });

  for (const kind of ['ioredis Cluster', 'node-redis cluster'] as const) {
    for (const wait of [false, true]) {
      test(`${kind}, CLUSTER FAILOVER, WAIT ${wait ? 'on' : 'off'}: no duplicate, no loss, no wrong answer`, async () => {
        const f = await scenario(cluster, kind, 'CLUSTER FAILOVER', wait);
        // Enough keys to have met the failover (a loaded CI machine sends fewer than a quiet one).
        expect(f.keys).toBeGreaterThan(20);
        expect({
          duplicates: f.duplicates,
          losses: f.losses,
          wrong: f.wrongAnswers,
          foreign: f.foreignAnswers,
        }).toEqual({ duplicates: 0, losses: 0, wrong: 0, foreign: 0 });
        // Writes follow the new master at once (with WAIT too: a redirected pipeline is sent again there).
        // (Measured in 76–128 ms here; the bound leaves room for a loaded machine.)
        expect(f.writesBackAfterMs).toBeGreaterThanOrEqual(0);
        expect(f.writesBackAfterMs).toBeLessThan(10_000);
      }, 60_000);
    }

    for (const mode of ['kill -9', 'replica cut off, then kill -9'] as const) {
      for (const wait of [false, true]) {
        test(`${kind}, ${mode}, WAIT ${wait ? 'on' : 'off'}: counted`, async () => {
          const f = await scenario(cluster, kind, mode, wait);
          expect(f.keys).toBeGreaterThan(20);
          expect(f.promotedAfterMs).toBeGreaterThan(NODE_TIMEOUT_MS);
          expect(f.foreignAnswers).toBe(0);
          if (wait) {
            // Every reservation and answer the store acknowledged survived; a duplicate only ever followed an
            // answer whose finalize had failed (the master died before its WAIT answered).
            expect({ losses: f.losses, lostReservations: f.lostReservations }).toEqual({
              losses: 0,
              lostReservations: 0,
            });
            expect(f.duplicates).toBe(f.duplicatesAfterUnacknowledged);
          }
          // Without WAIT nothing is asserted: replication is asynchronous, and what the master acknowledged while
          // its replica was cut off is gone (75–96 answers a run here, in the README). How many depends on how
          // many requests the machine sent in those 300 ms, which a test cannot hold to a number.
        }, 90_000);
      }
    }
  }
});
