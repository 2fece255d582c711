import { randomUUID } from 'node:crypto';
import { createIdempotency, type Idempotency, type IdempotencyStore } from '@idem/core';
import { createRedisStore, recordKey } from '@idem/store-redis';
import { Cluster, Redis } from 'ioredis';
import { createClient, createCluster } from 'redis';
import { v7 } from 'uuid';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { NOW_MS, reserveParams, response } from './support/params.js';
import {
  moveSlot,
  redisServerInstalled,
  sleep,
  startPrivateCluster,
  startPrivateRedis,
  until,
} from './support/private-servers.js';

// The servers of these tests are their own: pausing, killing and moving slots never touches the shared ones.
const installed = await redisServerInstalled();
const CONNECTION_NAME = 'idem-store-under-test';

const request = (key: string) => ({ method: 'POST', route: '/orders', path: '/orders', body: { n: 1 }, key });

/** Retry a key until it is answered (not 503, not 409), as a client would; count the handler's runs. */
async function settle(
  idem: Idempotency,
  key: string,
  runs: Map<string, number>,
): Promise<'executed' | 'replayed'> {
  for (let attempt = 0; attempt < 200; attempt++) {
    const result = await idem.begin(request(key));
    if (result.action === 'execute') {
      runs.set(key, (runs.get(key) ?? 0) + 1);
      const outcome = await result.execution.finish({ status: 201, headers: {}, body: `order ${key}` });
      if (outcome === 'finalized') return 'executed';
    } else if (result.action === 'replay') {
      return 'replayed';
    }
    await sleep(100);
  }
  throw new Error(`key ${key} was never answered`);
}

type Open = (url: string) => Promise<{ client: object; close(): Promise<void> }>;
const standaloneClients: [string, Open][] = [
  [
    'ioredis (re-sends unfulfilled commands after a reconnect, its default)',
    async (url) => {
      const client = new Redis(url, { connectionName: CONNECTION_NAME });
      client.on('error', () => {}); // reported through the failing calls
      return { client, close: async () => client.disconnect() };
    },
  ],
  [
    'ioredis (autoResendUnfulfilledCommands: false)',
    async (url) => {
      const client = new Redis(url, {
        connectionName: CONNECTION_NAME,
        autoResendUnfulfilledCommands: false,
      });
      client.on('error', () => {});
      return { client, close: async () => client.disconnect() };
    },
  ],
  [
    'node-redis',
    async (url) => {
      const client = createClient({ url, name: CONNECTION_NAME });
      client.on('error', () => {});
      await client.connect();
      return { client, close: async () => client.destroy() };
    },
  ],
];

describe.runIf(installed)(
  'standalone: the connection killed mid-call, a pause longer than the store timeout',
  () => {
    let server: Awaited<ReturnType<typeof startPrivateRedis>>;
    let admin: Redis;
    beforeAll(async () => {
      server = await startPrivateRedis();
      admin = new Redis(server.url);
    });
    afterAll(async () => {
      admin.disconnect();
      await server.stop();
    });

    const storeConnectionIds = async () =>
      String(await admin.call('CLIENT', 'LIST'))
        .split('\n')
        .filter((line) => line.includes(`name=${CONNECTION_NAME}`))
        .map((line) => /id=(\d+)/.exec(line)?.[1] as string);

    /**
     * A store on a fresh client of `open` (connected: a first call went through) and a coordinator with
     * `storeTimeoutMs`; afterwards the server's pause is lifted and the client closed.
     */
    async function onClient(
      open: Open,
      storeTimeoutMs: number,
      body: (store: IdempotencyStore, idem: Idempotency) => Promise<void>,
    ): Promise<void> {
      const { client, close } = await open(server.url);
      const store = createRedisStore(client, { prefix: `faults:${randomUUID()}:` });
      const idem = createIdempotency({ store, storeTimeoutMs, heartbeatIntervalMs: false });
      try {
        await store.load({ scope: '', key: 'warm-up' });
        await body(store, idem);
      } finally {
        await admin.call('CLIENT', 'UNPAUSE');
        await close();
      }
    }

    test.each(standaloneClients)(
      '%s: CLIENT KILL during a paused call → 503 with Retry-After, then one run',
      (_, open) =>
        onClient(open, 1_000, async (_store, idem) => {
          const runs = new Map<string, number>();
          const key = v7();
          await admin.call('CLIENT', 'PAUSE', '1500', 'WRITE');
          const pending = idem.begin(request(key));
          await sleep(200);
          for (const id of await storeConnectionIds()) await admin.call('CLIENT', 'KILL', 'ID', id);
          const first = await pending;
          expect(first.action === 'reject' && [first.error.status, first.error.headers]).toEqual([
            503,
            { 'retry-after': '1' },
          ]);
          expect(await settle(idem, key, runs)).toBe('executed');
          expect(await settle(idem, key, runs)).toBe('replayed');
          expect(runs.get(key)).toBe(1);
        }),
    );

    test.each(standaloneClients)(
      '%s: CLIENT PAUSE longer than storeTimeoutMs → 503, the late reservation is released, one run',
      (_, open) =>
        onClient(open, 300, async (store, idem) => {
          const runs = new Map<string, number>();
          const key = v7();
          await admin.call('CLIENT', 'PAUSE', '1200', 'WRITE');
          const started = performance.now();
          const first = await idem.begin(request(key));
          expect(performance.now() - started).toBeLessThan(1_000);
          expect(first.action === 'reject' && first.error.status).toBe(503);
          await sleep(1_300);
          // The reserve that timed out landed after the pause; the coordinator released it, so the retry runs.
          expect(await store.load({ scope: '', key })).toBeUndefined();
          expect(await settle(idem, key, runs)).toBe('executed');
          expect(await settle(idem, key, runs)).toBe('replayed');
          expect(runs.get(key)).toBe(1);
        }),
    );
  },
);

describe.runIf(installed)('replicas: WAIT with a real replica', () => {
  let master: Awaited<ReturnType<typeof startPrivateRedis>>;
  let replica: Awaited<ReturnType<typeof startPrivateRedis>>;
  beforeAll(async () => {
    master = await startPrivateRedis();
    replica = await startPrivateRedis(`127.0.0.1:${master.port}`);
    const admin = new Redis(master.url);
    await until('the replica to be in sync', async () =>
      /connected_slaves:1[\s\S]*state=online/.test(await admin.info('replication')),
    );
    admin.disconnect();
  });
  afterAll(async () => {
    await replica?.stop();
    await master?.stop();
  });

  test.each(standaloneClients)(
    '%s: count 1 is met; the reservation and the answer are on the replica when the call returns',
    async (_, open) => {
      const { client, close } = await open(master.url);
      const prefix = `wait:${randomUUID()}:`;
      const store = createRedisStore(client, { prefix, replicas: { count: 1, timeoutMs: 2_000 } });
      const onReplica = new Redis(replica.url);
      try {
        const params = reserveParams('wait');
        expect((await store.reserve(params)).outcome).toBe('reserved');
        const name = recordKey(prefix, params.scope, params.key);
        expect(String(await onReplica.get(name))).toContain(params.owner);
        expect(await store.finalize({ ...params, nowMs: NOW_MS, response: response('kept') })).toBe(true);
        expect(String(await onReplica.get(name))).toContain('kept');
        expect(await store.release({ ...params, owner: 'nobody' })).toBe(false);
      } finally {
        onReplica.disconnect();
        await close();
      }
    },
  );
});

type OpenCluster = (
  nodes: { host: string; port: number }[],
) => Promise<{ client: object; close(): Promise<void> }>;
const clusterClients: [string, OpenCluster][] = [
  [
    'ioredis Cluster',
    async (nodes) => {
      const client = new Cluster(nodes);
      await new Promise((resolve) => client.once('ready', resolve));
      client.on('error', () => {});
      return { client, close: async () => client.disconnect() };
    },
  ],
  [
    'node-redis cluster',
    async (nodes) => {
      const client = createCluster({
        rootNodes: nodes.map(({ host, port }) => ({ url: `redis://${host}:${port}` })),
      });
      client.on('error', () => {});
      await client.connect();
      return { client, close: async () => client.destroy() };
    },
  ],
];

describe.runIf(installed)('Cluster: a node stopped and restarted, a slot moved during calls', () => {
  let cluster: Awaited<ReturnType<typeof startPrivateCluster>>;
  beforeAll(async () => {
    cluster = await startPrivateCluster();
  }, 60_000);
  afterAll(async () => {
    await cluster?.stop();
  });

  /** The port of the master that owns `name`'s slot. */
  const ownerOf = async (name: string): Promise<number> => {
    const admin = new Redis(cluster.nodes[0] as { port: number });
    try {
      const slot = Number(await admin.cluster('KEYSLOT', name));
      const slots = await admin.cluster('SLOTS');
      const range = slots.find(([from, to]) => slot >= from && slot <= to);
      return range?.[2]?.[1] as number;
    } finally {
      admin.disconnect();
    }
  };

  test.each(clusterClients)(
    '%s: SHUTDOWN NOSAVE of a master → 503s while it is down, recovery after its restart, one run per key',
    async (_, open) => {
      const { client, close } = await open(cluster.nodes);
      const prefix = `faults:${randomUUID()}:`;
      const idem = createIdempotency({
        store: createRedisStore(client, { prefix }),
        storeTimeoutMs: 1_000,
        heartbeatIntervalMs: false,
      });
      const runs = new Map<string, number>();
      const stopped = 7103;
      try {
        const before = Array.from({ length: 9 }, () => v7());
        for (const key of before) expect(await settle(idem, key, runs)).toBe('executed');
        await cluster.stopNode(stopped);

        const storm = Array.from({ length: 9 }, () => v7());
        const during = await Promise.all([...storm, ...before].map((key) => idem.begin(request(key))));
        for (const result of during) {
          expect(result.action === 'reject' && [result.error.status, result.error.headers]).toEqual([
            503,
            { 'retry-after': '1' },
          ]);
        }
        expect(runs.size).toBe(before.length); // nothing ran while the cluster was down

        await cluster.restartNode();
        for (const key of storm) expect(await settle(idem, key, runs)).toBe('executed');
        for (const key of storm) expect(await settle(idem, key, runs)).toBe('replayed');
        for (const key of before) {
          // The restarted node kept nothing in memory (no persistence here: see the README's durability notes);
          // the other masters' records replay as before.
          const lost = (await ownerOf(recordKey(prefix, '', key))) === stopped;
          expect(await settle(idem, key, runs)).toBe(lost ? 'executed' : 'replayed');
        }
        for (const key of storm) expect(runs.get(key)).toBe(1);
      } finally {
        await close();
      }
    },
    90_000,
  );

  test.each(clusterClients)(
    '%s: a slot moved to another master during calls (ASK, then MOVED): the record moves intact',
    async (_, open) => {
      const { client, close } = await open(cluster.nodes);
      const prefix = `faults:${randomUUID()}:`;
      const store = createRedisStore(client, { prefix });
      try {
        const params = reserveParams('moving');
        await store.reserve(params);
        const name = recordKey(prefix, params.scope, params.key);
        const from = await ownerOf(name);
        const to = cluster.nodes.map((n) => n.port).find((p) => p !== from) as number;
        const admin = new Redis({ port: from });
        const slot = Number(await admin.cluster('KEYSLOT', name));
        admin.disconnect();

        let moving = true;
        const errors: unknown[] = [];
        let calls = 0;
        const traffic = (async () => {
          let leaseUntilMs = params.leaseUntilMs;
          while (moving) {
            leaseUntilMs += 1;
            try {
              expect(await store.renewLease({ ...params, leaseUntilMs })).toBe(true);
              expect((await store.load(params))?.leaseUntilMs).toBe(leaseUntilMs);
              calls += 2;
            } catch (error) {
              errors.push(error);
              if (errors.length > 10) return; // enough to fail on; never spin
            }
          }
        })();
        await moveSlot(
          slot,
          name,
          from,
          to,
          cluster.nodes.map((n) => n.port),
        );
        moving = false;
        await traffic;

        expect(await ownerOf(name)).toBe(to);
        expect(calls).toBeGreaterThan(0);
        expect(errors).toEqual([]);
        expect(await store.finalize({ ...params, nowMs: NOW_MS, response: response('moved') })).toBe(true);
        const again = await store.reserve(reserveParams('moving', params.key));
        expect(
          again.outcome === 'exists' && new TextDecoder().decode(again.record.response?.body ?? undefined),
        ).toBe('moved');
      } finally {
        await close();
      }
    },
  );
});
