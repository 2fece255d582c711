import { randomBytes } from 'node:crypto';
import type { ConformanceOptions, StoreUnderTest } from '@idem/store-conformance';
import { createRedisStore, type RedisStoreOptions } from '@idem/store-redis';
import { Cluster, Redis } from 'ioredis';
import { createClient, createCluster } from 'redis';

export const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
export const CLUSTER_NODES = (
  process.env.REDIS_CLUSTER_NODES ?? '127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003'
)
  .split(',')
  .map((address) => {
    const [host = '127.0.0.1', port = '0'] = address.trim().split(':');
    return { host, port: Number(port) };
  });

/**
 * Whether a Redis server answers. Under CI=true a missing server is a failure, never a skip; elsewhere the
 * suite is skipped with the reason printed.
 */
export async function serverAvailable(name: string, probe: () => Promise<unknown>): Promise<boolean> {
  try {
    await probe();
    return true;
  } catch (error) {
    const reason = `${name} is not reachable (${(error as Error).message})`;
    if (process.env.CI === 'true') throw new Error(`${reason}; under CI=true every Redis suite must run`);
    console.warn(`skipping the ${name} suites: ${reason}`);
    return false;
  }
}

const ping = async (connect: () => Redis) => {
  const client = connect();
  try {
    await client.ping();
  } finally {
    client.disconnect();
  }
};
const probeOptions = {
  lazyConnect: false,
  maxRetriesPerRequest: 0,
  connectTimeout: 2_000,
  retryStrategy: () => null,
};

export const redisUp = () =>
  serverAvailable(`Redis at ${REDIS_URL}`, () => ping(() => new Redis(REDIS_URL, probeOptions)));

export const clusterUp = () =>
  serverAvailable(`the Redis Cluster at ${CLUSTER_NODES.map((n) => `${n.host}:${n.port}`).join(',')}`, () =>
    Promise.all(
      CLUSTER_NODES.map(async ({ host, port }) => {
        const node = new Redis({ host, port, ...probeOptions });
        try {
          const info = await node.cluster('INFO');
          if (!String(info).includes('cluster_state:ok'))
            throw new Error(`${host}:${port} is not in a healthy cluster`);
        } finally {
          node.disconnect();
        }
      }),
    ),
  );

/** A client of one of the four kinds the store supports; `close` ends it. */
export interface TestClient {
  readonly client: object;
  close(): Promise<void>;
}

export type ClientKind = 'ioredis' | 'node-redis' | 'ioredis Cluster' | 'node-redis cluster';

/** Open a client of `kind` on the standalone server or the cluster, ready for commands. */
export async function openClient(kind: ClientKind): Promise<TestClient> {
  switch (kind) {
    case 'ioredis': {
      const client = new Redis(REDIS_URL);
      return { client, close: async () => void (await client.quit()) };
    }
    case 'ioredis Cluster': {
      const client = new Cluster(CLUSTER_NODES);
      await new Promise<void>((resolve, reject) => {
        client.once('ready', resolve);
        client.once('error', reject);
      });
      return { client, close: async () => void (await client.quit()) };
    }
    case 'node-redis': {
      const client = createClient({ url: REDIS_URL });
      client.on('error', () => {}); // reported through the failing calls; the client reconnects by itself
      await client.connect();
      return { client, close: async () => client.destroy() };
    }
    case 'node-redis cluster': {
      const client = createCluster({
        rootNodes: CLUSTER_NODES.map(({ host, port }) => ({ url: `redis://${host}:${port}` })),
      });
      client.on('error', () => {});
      await client.connect();
      return { client, close: async () => client.destroy() };
    }
  }
}

export const isClusterKind = (kind: ClientKind) => kind.endsWith('luster');

/** A prefix no other test or run uses. */
export const uniquePrefix = () => `idem-test:${randomBytes(6).toString('hex')}:`;

/** Delete every key under `prefix`, on the server or every node of the cluster. */
export async function sweep(kind: ClientKind, prefix: string): Promise<void> {
  const nodes = isClusterKind(kind) ? CLUSTER_NODES.map((n) => new Redis(n)) : [new Redis(REDIS_URL)];
  await Promise.all(
    nodes.map(async (node) => {
      try {
        let cursor = '0';
        do {
          const [next, keys] = await node.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1_000);
          cursor = next;
          // One key per command: on a cluster node, keys of different slots cannot share one (CROSSSLOT).
          await Promise.all(keys.map((key) => node.unlink(key)));
        } while (cursor !== '0');
      } finally {
        node.disconnect();
      }
    }),
  );
}

/**
 * Run `body` with a fresh prefix; then close `client` (node-redis: `destroy`, ioredis: `disconnect`) and sweep
 * the prefix's keys from `kind`'s servers.
 */
export async function withPrefix(
  kind: ClientKind,
  client: { destroy(): unknown } | { disconnect(): unknown },
  body: (prefix: string) => Promise<void>,
): Promise<void> {
  const prefix = uniquePrefix();
  try {
    await body(prefix);
  } finally {
    if ('destroy' in client) client.destroy();
    else client.disconnect();
    await sweep(kind, prefix);
  }
}

/** The conformance kit's store factory for one client kind: a fresh prefix per test, a client per instance. */
export function redisStoreFactory(kind: ClientKind, options: RedisStoreOptions = {}) {
  return async (): Promise<StoreUnderTest> => {
    const prefix = uniquePrefix();
    const first = await openClient(kind);
    return {
      store: createRedisStore(first.client, { ...options, prefix }),
      async connect() {
        const other = await openClient(kind);
        return { ...createRedisStore(other.client, { ...options, prefix }), close: other.close };
      },
      async cleanup() {
        await first.close();
        await sweep(kind, prefix);
      },
    };
  };
}

/**
 * The kit's options for the Redis store: why it replaces the purge-count tests (Redis expires records itself),
 * and the optional inspection methods it has, whose groups then run.
 */
export const KIT_OPTIONS: ConformanceOptions = {
  nativeExpiry: {
    reason:
      'every record carries PEXPIREAT at its expiresAtMs, so Redis deletes it itself and purgeExpired returns 0',
  },
  inspection: ['forget', 'list', 'stats'],
};
