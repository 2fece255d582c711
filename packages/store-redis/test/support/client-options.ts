import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { IdempotentRequest } from '@idem/core';
import type { StoreUnderTest } from '@idem/store-conformance';
import { createRedisStore, type RedisStoreOptions } from '@idem/store-redis';
import { Cluster, type ClusterOptions, Redis, type RedisOptions } from 'ioredis';
import { createClient, createCluster } from 'redis';
import { until } from './private-servers.js';
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
 * `keyPrefix` is what the client itself puts before every key (ioredis or node-redis `keyPrefix`), so that the
 * test knows where the records land.
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
type NodeRedisClusterOptions = Omit<Parameters<typeof createCluster>[0], 'rootNodes' | 'RESP'>;

/** A variant's string keyPrefix (the matrix uses strings; Buffers have a test of their own). */
const stringPrefix = (keyPrefix: unknown): string => (typeof keyPrefix === 'string' ? keyPrefix : '');

export const nodeRedisVariant = (name: string, options: NodeRedisOptions = {}): ClientVariant => ({
  name: `node-redis ${name}`,
  kind: 'node-redis',
  keyPrefix: stringPrefix(options.keyPrefix),
  async open() {
    const client = createClient({ url: REDIS_URL, ...options });
    client.on('error', () => {}); // reported through the failing calls
    await client.connect();
    return { client, close: async () => client.destroy() };
  },
});

export const nodeRedisClusterVariant = (
  name: string,
  RESP: 2 | 3,
  options: NodeRedisClusterOptions = {},
): ClientVariant => ({
  name: `node-redis cluster ${name}`,
  kind: 'node-redis cluster',
  keyPrefix: stringPrefix(options.keyPrefix),
  async open() {
    const client = createCluster({
      ...options,
      rootNodes: CLUSTER_NODES.map(({ host, port }) => ({ url: `redis://${host}:${port}` })),
      RESP,
    });
    client.on('error', () => {});
    await client.connect();
    return { client, close: async () => client.destroy() };
  },
});

/** The conformance kit's store factory for one variant: a fresh prefix per test, a client per instance. */
export function variantStoreFactory(
  variant: ClientVariant,
  options: RedisStoreOptions = {},
  sweepKeys = (keyPrefix: string) => sweep(variant.kind, keyPrefix),
) {
  return async (): Promise<StoreUnderTest> => {
    const prefix = uniquePrefix();
    const first = await variant.open();
    return {
      store: createRedisStore(first.client, { ...options, prefix }),
      async connect() {
        const other = await variant.open();
        return { ...createRedisStore(other.client, { ...options, prefix }), close: other.close };
      },
      async cleanup() {
        await first.close();
        await sweepKeys(`${variant.keyPrefix}${prefix}`);
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

const run = promisify(execFile);

/**
 * A Redis Cluster of this test file's own with a replica per master (3 + 3 nodes on `ports`, default 7301-7306,
 * never the shared cluster's), started with redis-server and joined by `redis-cli --cluster create`, for what
 * only replicas show (ioredis `scaleReads`, WAIT). Ready when every node sees cluster_state:ok and every replica
 * is in sync with its master.
 */
export async function startReplicatedCluster(ports = [7301, 7302, 7303, 7304, 7305, 7306]) {
  const dir = mkdtempSync(join(tmpdir(), 'idem-replicated-cluster-'));
  // Nodes a crashed run left on these ports would not join this cluster.
  await Promise.all(
    ports.map((port) => run('redis-cli', ['-p', String(port), 'shutdown', 'nosave']).catch(() => {})),
  );
  const children: ChildProcess[] = ports.map((port) => {
    mkdirSync(join(dir, String(port)));
    return spawn(
      'redis-server',
      [
        ...['--port', String(port), '--bind', '127.0.0.1', '--dir', join(dir, String(port))],
        ...[
          '--cluster-enabled',
          'yes',
          '--cluster-config-file',
          'nodes.conf',
          '--cluster-node-timeout',
          '5000',
        ],
        ...['--save', '', '--appendonly', 'no'],
      ],
      { stdio: 'ignore' },
    );
  });
  const ask = async (port: number, ...args: string[]) =>
    (await run('redis-cli', ['-p', String(port), ...args])).stdout;
  const stop = async () => {
    for (const child of children) child.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await until('the nodes to answer', async () =>
      (await Promise.all(ports.map((port) => ask(port, 'ping')))).every((answer) => answer.trim() === 'PONG'),
    );
    await run('redis-cli', [
      '--cluster',
      'create',
      ...ports.map((port) => `127.0.0.1:${port}`),
      '--cluster-replicas',
      '1',
      '--cluster-yes',
    ]);
    // Redis leaves a replica out of CLUSTER SLOTS (where clients learn of it) until it has replicated
    // something: one write per master ('b', 'c' and 'a' hash to slots 3300, 7365 and 15495).
    await Promise.all(
      ['b', 'c', 'a'].map((tag) => ask(ports[0] as number, '-c', 'set', `{${tag}}warm`, '1')),
    );
    await until('the cluster to be ok with every replica in sync and listed', async () => {
      const slots = await Promise.all(ports.map((port) => ask(port, 'cluster', 'slots')));
      if (!slots.every((listing) => ports.every((port) => listing.includes(String(port))))) return false;
      const infos = await Promise.all(ports.map((port) => ask(port, 'info', 'replication')));
      const states = await Promise.all(ports.map((port) => ask(port, 'cluster', 'info')));
      return (
        states.every((state) => state.includes('cluster_state:ok')) &&
        infos.filter((info) => info.includes('role:slave')).length === ports.length / 2 &&
        infos.every((info) => info.includes('role:master') || info.includes('master_link_status:up'))
      );
    });
  } catch (error) {
    await stop();
    throw error;
  }
  const roleOf = async (port: number) =>
    (await ask(port, 'info', 'replication')).includes('role:slave') ? 'replica' : 'master';
  return {
    nodes: ports.map((port) => ({ host: '127.0.0.1', port })),
    /** The ports of the replicas. */
    async replicas() {
      const roles = await Promise.all(ports.map(roleOf));
      return ports.filter((_, i) => roles[i] === 'replica');
    },
    /** How many times each command ran on the node on `port` (INFO commandstats). */
    async commandCalls(port: number): Promise<Record<string, number>> {
      const calls: Record<string, number> = {};
      for (const match of (await ask(port, 'info', 'commandstats')).matchAll(
        /cmdstat_([\w|]+):calls=(\d+)/g,
      )) {
        calls[match[1] as string] = Number(match[2]);
      }
      return calls;
    },
    stop,
  };
}

/** A keyed POST /orders of alice's, as the coordinator round trips of these suites send it. */
export const request = (key: string): IdempotentRequest => ({
  method: 'POST',
  route: '/orders',
  path: '/orders',
  body: { item: 'book' },
  key,
  scope: 'alice',
});
