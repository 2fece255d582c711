import type { StoreUnderTest } from '@idem/store-conformance';
import { createRedisStore } from '@idem/store-redis';
import { Cluster, type ClusterOptions, Redis, type RedisOptions } from 'ioredis';
import { createClient, createCluster } from 'redis';
import {
  CLUSTER_NODES,
  type ClientKind,
  isClusterKind,
  REDIS_URL,
  sweep,
  type TestClient,
  uniquePrefix,
} from './servers.js';

/**
 * One client construction a user would plausibly write: a kind of client and the options it was built with.
 * `keyPrefix` is what the client itself puts before every key (ioredis `keyPrefix`), so that the test knows
 * where the records land.
 */
export interface ClientVariant {
  readonly name: string;
  readonly kind: ClientKind;
  readonly keyPrefix: string;
  open(): Promise<TestClient>;
}

const ioredisReady = async (client: Redis | Cluster): Promise<TestClient> => {
  if (client.status !== 'ready') {
    await new Promise<void>((resolve, reject) => {
      client.once('ready', resolve);
      client.once('error', reject);
    });
  }
  return { client, close: async () => void (await client.quit()) };
};

export const ioredisVariant = (
  name: string,
  options: Omit<RedisOptions, 'replyMapping'> = {},
): ClientVariant => ({
  name: `ioredis ${name}`,
  kind: 'ioredis',
  keyPrefix: options.keyPrefix ?? '',
  open: () => ioredisReady(new Redis(REDIS_URL, options)),
});

export const ioredisClusterVariant = (
  name: string,
  options: Omit<ClusterOptions, 'redisOptions'> = {},
): ClientVariant => ({
  name: `ioredis Cluster ${name}`,
  kind: 'ioredis Cluster',
  keyPrefix: options.keyPrefix ?? '',
  open: () => ioredisReady(new Cluster(CLUSTER_NODES, options)),
});

type NodeRedisOptions = NonNullable<Parameters<typeof createClient>[0]>;

export const nodeRedisVariant = (name: string, options: NodeRedisOptions = {}): ClientVariant => ({
  name: `node-redis ${name}`,
  kind: 'node-redis',
  keyPrefix: '',
  async open() {
    const client = createClient({ url: REDIS_URL, ...options });
    client.on('error', () => {}); // reported through the failing calls
    await client.connect();
    return { client, close: async () => client.destroy() };
  },
});

export const nodeRedisClusterVariant = (name: string, RESP: 2 | 3): ClientVariant => ({
  name: `node-redis cluster ${name}`,
  kind: 'node-redis cluster',
  keyPrefix: '',
  async open() {
    const client = createCluster({
      rootNodes: CLUSTER_NODES.map(({ host, port }) => ({ url: `redis://${host}:${port}` })),
      RESP,
    });
    client.on('error', () => {});
    await client.connect();
    return { client, close: async () => client.destroy() };
  },
});

/** The conformance kit's store factory for one variant: a fresh prefix per test, a client per instance. */
export function variantStoreFactory(variant: ClientVariant) {
  return async (): Promise<StoreUnderTest> => {
    const prefix = uniquePrefix();
    const first = await variant.open();
    return {
      store: createRedisStore(first.client, { prefix }),
      async connect() {
        const other = await variant.open();
        return { ...createRedisStore(other.client, { prefix }), close: other.close };
      },
      async cleanup() {
        await first.close();
        await sweep(variant.kind, `${variant.keyPrefix}${prefix}`);
      },
    };
  };
}

/** The raw Redis keys under `pattern`, on the server or every node of the cluster. */
export async function keysMatching(kind: ClientKind, pattern: string): Promise<string[]> {
  const nodes = isClusterKind(kind) ? CLUSTER_NODES.map((n) => new Redis(n)) : [new Redis(REDIS_URL)];
  try {
    const found = await Promise.all(nodes.map((node) => node.keys(pattern)));
    return found.flat().sort();
  } finally {
    for (const node of nodes) node.disconnect();
  }
}
