import { createIdempotency } from '@idem/core';
import { conformanceGroups } from '@idem/store-conformance';
import { createRedisStore } from '@idem/store-redis';
import { Cluster, Redis } from 'ioredis';
import { createClient } from 'redis';
import { v7 } from 'uuid';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  type ClientVariant,
  ioredisClusterVariant,
  ioredisVariant,
  request,
  startReplicatedCluster,
  variantStoreFactory,
} from './support/client-options.js';
import { NOW_MS, reserveParams, response } from './support/params.js';
import { redisServerInstalled } from './support/private-servers.js';
import {
  CLUSTER_NODES,
  clusterUp,
  KIT_OPTIONS,
  REDIS_URL,
  redisUp,
  sweep,
  uniquePrefix,
  withPrefix,
} from './support/servers.js';

const standalone = await redisUp();
const cluster = await clusterUp();
const installed = await redisServerInstalled();

/** begin, and how long it took: a fault must come back at once, not at the coordinator's store timeout. */
async function beginTimed(client: object) {
  const idem = createIdempotency({
    store: createRedisStore(client, { prefix: uniquePrefix() }),
    storeTimeoutMs: 10_000,
    heartbeatIntervalMs: false,
  });
  const started = performance.now();
  const result = await idem.begin(request(v7()));
  return { result, tookMs: performance.now() - started };
}

/** Execute once and replay, through the coordinator, on `client`. */
async function executesOnceAndReplays(client: object, prefix: string) {
  const idem = createIdempotency({ store: createRedisStore(client, { prefix }), heartbeatIntervalMs: false });
  const key = v7();
  const first = await idem.begin(request(key));
  if (first.action !== 'execute') throw new Error(`expected execute, got ${first.action}`);
  await first.execution.finish({ status: 201, headers: {}, body: 'made' });
  const retry = await idem.begin(request(key));
  expect(retry.action).toBe('replay');
}

describe.runIf(standalone && cluster)('offline queue off: a call before the client is connected', () => {
  const expectFault = ({ result, tookMs }: Awaited<ReturnType<typeof beginTimed>>) => {
    expect(result.action).toBe('reject');
    if (result.action !== 'reject') return;
    expect(result.error.code).toBe('IDEMPOTENCY_STORE_UNAVAILABLE');
    expect(result.error.status).toBe(503);
    expect(tookMs).toBeLessThan(2_000); // the client refused it; the 10 s store timeout did not have to
  };

  test.each([false, true])(
    'ioredis enableOfflineQueue false (enableAutoPipelining %s): store-unavailable at once, never a hang',
    async (enableAutoPipelining) => {
      const client = new Redis(REDIS_URL, { enableOfflineQueue: false, enableAutoPipelining });
      client.on('error', () => {}); // its handshake fails the same way; reported through the call
      try {
        expect(client.status).not.toBe('ready');
        expectFault(await beginTimed(client));
      } finally {
        client.disconnect();
      }
    },
  );

  test.each([false, true])(
    'ioredis Cluster enableOfflineQueue false (enableAutoPipelining %s): store-unavailable at once, never a hang',
    async (enableAutoPipelining) => {
      const client = new Cluster(CLUSTER_NODES, { enableOfflineQueue: false, enableAutoPipelining });
      try {
        expect(client.status).not.toBe('ready');
        expectFault(await beginTimed(client));
      } finally {
        client.disconnect();
      }
    },
  );

  test('node-redis disableOfflineQueue, connecting or never connected: store-unavailable at once', async () => {
    const client = createClient({ url: REDIS_URL, disableOfflineQueue: true });
    client.on('error', () => {});
    expectFault(await beginTimed(client)); // connect() never called
    const connecting = client.connect();
    expectFault(await beginTimed(client));
    await connecting;
    await executesOnceAndReplays(client, uniquePrefix()); // and it works once connected
    client.destroy();
  });
});

describe.runIf(standalone && cluster)('lazyConnect: the first store call connects the client', () => {
  test.each([false, true])('ioredis lazyConnect (enableAutoPipelining %s)', async (enableAutoPipelining) => {
    const client = new Redis(REDIS_URL, { lazyConnect: true, enableAutoPipelining });
    await withPrefix('ioredis', client, async (prefix) => {
      expect(client.status).toBe('wait');
      await executesOnceAndReplays(client, prefix);
    });
  });

  test.each([false, true])(
    'ioredis Cluster lazyConnect (enableAutoPipelining %s)',
    async (enableAutoPipelining) => {
      const client = new Cluster(CLUSTER_NODES, { lazyConnect: true, enableAutoPipelining });
      await withPrefix('ioredis Cluster', client, async (prefix) => {
        expect(client.status).toBe('wait');
        await executesOnceAndReplays(client, prefix);
      });
    },
  );
});

describe.runIf(standalone)('a client in subscriber mode', () => {
  test.each([false, true])(
    'ioredis over RESP2 (enableAutoPipelining %s): every call is a store fault, never a wrong answer',
    async (enableAutoPipelining) => {
      const client = new Redis(REDIS_URL, { protocol: 2, enableAutoPipelining });
      try {
        await client.subscribe(`idem-test-${v7()}`);
        const { result } = await beginTimed(client);
        expect(result.action === 'reject' && result.error.code).toBe('IDEMPOTENCY_STORE_UNAVAILABLE');
      } finally {
        client.disconnect();
      }
    },
  );

  test('ioredis over RESP3 (its default): commands are allowed while subscribed, so the store works', async () => {
    const client = new Redis(REDIS_URL, { enableAutoPipelining: true });
    await withPrefix('ioredis', client, async (prefix) => {
      await client.subscribe(`idem-test-${v7()}`);
      await executesOnceAndReplays(client, prefix);
    });
  });

  test.each([2, 3] as const)('node-redis RESP%s', async (RESP) => {
    const client = await createClient({ url: REDIS_URL, RESP }).connect();
    await withPrefix('node-redis', client, async (prefix) => {
      await client.subscribe(`idem-test-${v7()}`, () => {});
      if (RESP === 3) {
        await executesOnceAndReplays(client, prefix);
      } else {
        const { result } = await beginTimed(client);
        expect(result.action === 'reject' && result.error.code).toBe('IDEMPOTENCY_STORE_UNAVAILABLE');
      }
    });
  });
});

describe.runIf(standalone)('MULTI', () => {
  test('a client left inside a MULTI (ioredis multi({ pipeline: false })): each call fails as a fault, naming the MULTI', async () => {
    const client = new Redis(REDIS_URL);
    await withPrefix('ioredis', client, async (prefix) => {
      const store = createRedisStore(client, { prefix });
      const params = reserveParams('multi');
      await client.multi({ pipeline: false });
      await expect(store.reserve(params)).rejects.toThrow(/queued in a MULTI transaction/);
      // A fenced write would have answered false, a lost lease, while its script ran at the owner's EXEC.
      await expect(store.finalize({ ...params, nowMs: NOW_MS, response: response('x') })).rejects.toThrow(
        /queued in a MULTI transaction/,
      );
      await expect(store.load(params)).rejects.toThrow(/queued in a MULTI transaction/);
      await client.discard();
      expect((await store.reserve(reserveParams('multi'))).outcome).toBe('reserved');
    });
  });

  test.each([2, 3] as const)(
    'a node-redis client (RESP%s) left inside a raw MULTI: each call fails as a fault, naming the MULTI',
    async (RESP) => {
      const client = await createClient({ url: REDIS_URL, RESP }).connect();
      await withPrefix('node-redis', client, async (prefix) => {
        const store = createRedisStore(client, { prefix });
        const params = reserveParams('multi');
        await client.sendCommand(['MULTI']);
        await expect(store.reserve(params)).rejects.toThrow(/queued in a MULTI transaction/);
        await expect(store.finalize({ ...params, nowMs: NOW_MS, response: response('x') })).rejects.toThrow(
          /queued in a MULTI transaction/,
        );
        await client.sendCommand(['DISCARD']);
        expect((await store.reserve(reserveParams('multi'))).outcome).toBe('reserved');
      });
    },
  );

  test.each([false, true])(
    "the owner's own pipelines and multi() beside the store's calls (enableAutoPipelining %s)",
    async (enableAutoPipelining) => {
      const client = new Redis(REDIS_URL, { enableAutoPipelining });
      await withPrefix('ioredis', client, async (prefix) => {
        const store = createRedisStore(client, { prefix, replicas: { count: 0, timeoutMs: 100 } });
        const own = `${prefix}own`;
        await Promise.all(
          Array.from({ length: 30 }, async (_, i) => {
            const params = reserveParams('beside', `k${i}`);
            const [reserved, transaction, pipeline] = await Promise.all([
              store.reserve(params),
              client.multi().incr(own).get(own).exec(),
              client.pipeline().incr(own).exec(),
            ]);
            expect(reserved.outcome).toBe('reserved');
            expect(transaction?.every(([error]) => error === null)).toBe(true);
            expect(pipeline?.[0]?.[0]).toBeNull();
            expect(await store.finalize({ ...params, nowMs: NOW_MS, response: response(`r${i}`) })).toBe(
              true,
            );
            expect((await store.reserve(reserveParams('beside', `k${i}`))).outcome).toBe('exists');
          }),
        );
        expect(Number(await client.get(own))).toBe(60);
      });
    },
  );
});

/** SCRIPT FLUSH on the standalone server or on every node of the shared cluster. */
const flushScripts = async (kind: ClientVariant['kind']) => {
  const admins = kind === 'ioredis' ? [new Redis(REDIS_URL)] : CLUSTER_NODES.map((node) => new Redis(node));
  await Promise.all(
    admins.map(async (admin) => {
      try {
        await admin.script('FLUSH');
      } finally {
        admin.disconnect();
      }
    }),
  );
};

const autoPipelined: ClientVariant[] = [
  ...(standalone
    ? [
        ioredisVariant('enableAutoPipelining', { enableAutoPipelining: true }),
        ioredisVariant("enableAutoPipelining and keyPrefix 'app:'", {
          enableAutoPipelining: true,
          keyPrefix: 'app:',
        }),
      ]
    : []),
  ...(cluster
    ? [
        ioredisClusterVariant('enableAutoPipelining', { enableAutoPipelining: true }),
        ioredisClusterVariant("enableAutoPipelining and keyPrefix 'app:'", {
          enableAutoPipelining: true,
          keyPrefix: 'app:',
        }),
      ]
    : []),
];

describe.each(autoPipelined.map((variant) => [variant.name, variant] as const))('%s', (_, variant) => {
  test('NOSCRIPT after SCRIPT FLUSH mid-run: the script is loaded again and every call succeeds', async () => {
    const opened = await variant.open();
    const prefix = uniquePrefix();
    try {
      const store = createRedisStore(opened.client, { prefix });
      await flushScripts(variant.kind);
      const run = async (i: number) => {
        const params = reserveParams('noscript', `k${i}`);
        expect((await store.reserve(params)).outcome).toBe('reserved');
        if (i % 5 === 0) await flushScripts(variant.kind);
        expect(await store.finalize({ ...params, nowMs: NOW_MS, response: response(`r${i}`) })).toBe(true);
        expect((await store.reserve(reserveParams('noscript', `k${i}`))).outcome).toBe('exists');
      };
      await Promise.all(Array.from({ length: 40 }, (_, i) => run(i)));
    } finally {
      await opened.close();
      await sweep(variant.kind, `${variant.keyPrefix}${prefix}`);
    }
  });

  // replicas: { count: 0 } sends each write and its WAIT in an explicit pipeline, beside auto-pipelining.
  describe('with replicas: { count: 0 } (each write and its WAIT in one explicit pipeline)', () => {
    for (const group of [
      conformanceGroups.reserve,
      conformanceGroups.fencing,
      conformanceGroups.concurrency,
    ]) {
      group({ describe, test }, variantStoreFactory(variant, { replicas: { count: 0, timeoutMs: 100 } }));
    }
  });
});

describe.runIf(installed)('ioredis Cluster scaleReads on a cluster with a replica per master', () => {
  let replicated: Awaited<ReturnType<typeof startReplicatedCluster>>;
  beforeAll(async () => {
    replicated = await startReplicatedCluster();
  }, 90_000);
  afterAll(async () => {
    await replicated?.stop();
  });

  const open = async (options: ConstructorParameters<typeof Cluster>[1]) => {
    const client = new Cluster(replicated.nodes, options);
    await new Promise<void>((resolve, reject) => {
      client.once('ready', resolve);
      client.once('error', reject);
    });
    return client;
  };

  test.each([
    ['slave', false],
    ['all', false],
    ['slave', true],
  ] as const)(
    "scaleReads '%s' (enableAutoPipelining %s): load reads from the slot's master, never a replica that may lag",
    async (scaleReads, enableAutoPipelining) => {
      const client = await open({ scaleReads, enableAutoPipelining });
      try {
        const store = createRedisStore(client, { prefix: uniquePrefix() });
        const written = await Promise.all(
          Array.from({ length: 30 }, async (_, i) => {
            const params = reserveParams('reads', `k${i}`);
            await store.reserve(params);
            await store.finalize({ ...params, nowMs: NOW_MS, response: response(`r${i}`) });
            return params;
          }),
        );
        const replicas = await replicated.replicas();
        expect(replicas).toHaveLength(3);
        expect(client.nodes('slave')).toHaveLength(3); // the client knows them, so it could read from them
        const before = await Promise.all(replicas.map((port) => replicated.commandCalls(port)));
        const loaded = await Promise.all(written.map((params) => store.load(params)));
        expect(loaded.every((record) => record?.response?.status === 201)).toBe(true);
        const after = await Promise.all(replicas.map((port) => replicated.commandCalls(port)));
        const replicaReads = after.map((calls, i) => (calls.get ?? 0) - (before[i]?.get ?? 0));
        expect(replicaReads).toEqual(replicas.map(() => 0));
      } finally {
        client.disconnect();
      }
    },
  );

  test("replicas: { count: 1 } under enableAutoPipelining and scaleReads 'slave': every write is acknowledged by its replica", async () => {
    const client = await open({ scaleReads: 'slave', enableAutoPipelining: true });
    try {
      const store = createRedisStore(client, {
        prefix: uniquePrefix(),
        replicas: { count: 1, timeoutMs: 2_000 },
      });
      await Promise.all(
        Array.from({ length: 20 }, async (_, i) => {
          const params = reserveParams('acked', `k${i}`);
          expect((await store.reserve(params)).outcome).toBe('reserved');
          expect(await store.finalize({ ...params, nowMs: NOW_MS, response: response(`r${i}`) })).toBe(true);
        }),
      );
    } finally {
      client.disconnect();
    }
  });

  describe("the conformance kit on scaleReads 'slave' with enableAutoPipelining", () => {
    const variant: ClientVariant = {
      name: "ioredis Cluster scaleReads 'slave'",
      kind: 'ioredis Cluster',
      keyPrefix: '',
      async open() {
        const client = await open({ scaleReads: 'slave', enableAutoPipelining: true });
        return { client, close: async () => client.disconnect() };
      },
    };
    for (const group of Object.values(conformanceGroups)) {
      group(
        { describe, test },
        variantStoreFactory(variant, {}, async () => {}),
        KIT_OPTIONS,
      );
    }
  });
});
