import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { type AddressInfo, createServer } from 'node:net';
import { Cluster, Redis } from 'ioredis';

export const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
/** The local cluster that scripts/redis-cluster.sh starts (test/global-setup.ts runs it), as host:port,… */
export const CLUSTER_NODES =
  process.env.REDIS_CLUSTER_NODES ?? '127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003';
/** IDEMPOTENCY_STORE_URL of that cluster. */
export const CLUSTER_URL = `redis+cluster://${CLUSTER_NODES}`;

const nodesOf = (list: string) =>
  list.split(',').map((address) => {
    const [host = '127.0.0.1', port = '0'] = address.trim().split(':');
    return { host, port: Number(port) };
  });

/**
 * Whether a Redis service answers. Under CI=true one that does not fails the run; elsewhere its suites are
 * skipped with the reason printed.
 */
async function available(name: string, probe: () => Promise<void>): Promise<boolean> {
  try {
    await probe();
    return true;
  } catch (error) {
    const why = `${name} is not reachable (${(error as Error).message})`;
    if (process.env.CI === 'true') throw new Error(`${why}; under CI=true every Redis suite must run`);
    console.warn(`skipping the ${name} suites: ${why}`);
    return false;
  }
}

const probeOptions = { maxRetriesPerRequest: 0, connectTimeout: 2_000, retryStrategy: () => null };

export const redisUp = () =>
  available(`Redis at ${REDIS_URL}`, async () => {
    const client = new Redis(REDIS_URL, probeOptions);
    try {
      await client.ping();
    } finally {
      client.disconnect();
    }
  });

export const clusterUp = () =>
  available(`the Redis Cluster at ${CLUSTER_NODES}`, async () => {
    await Promise.all(
      nodesOf(CLUSTER_NODES).map(async ({ host, port }) => {
        const node = new Redis({ host, port, ...probeOptions });
        try {
          const info = String(await node.cluster('INFO'));
          if (!info.includes('cluster_state:ok'))
            throw new Error(`${host}:${port} is not in a healthy cluster`);
        } finally {
          node.disconnect();
        }
      }),
    );
  });

/** A record key prefix (IDEMPOTENCY_STORE_PREFIX) no other test or run uses. */
export const uniquePrefix = () => `idem-test:catalog:${randomBytes(6).toString('hex')}:`;

/** A client of the standalone server or of the cluster, for a test to look at (or delete) the records. */
export function redisClient(cluster: boolean): Redis | Cluster {
  return cluster ? new Cluster(nodesOf(CLUSTER_NODES)) : new Redis(REDIS_URL);
}

/** The record keys under `prefix`: on the server, or on every master of the cluster. */
export async function keysUnder(cluster: boolean, prefix: string): Promise<string[]> {
  const nodes = cluster ? nodesOf(CLUSTER_NODES).map((n) => new Redis(n)) : [new Redis(REDIS_URL)];
  try {
    const found = await Promise.all(
      nodes.map(async (node) => {
        // Replicas answer SCAN too, with their master's keys: only masters are read.
        if (cluster && !String(await node.info('replication')).includes('role:master')) return [];
        const keys: string[] = [];
        let cursor = '0';
        do {
          const [next, page] = await node.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1_000);
          cursor = next;
          keys.push(...page);
        } while (cursor !== '0');
        return keys;
      }),
    );
    return found.flat().sort();
  } finally {
    for (const node of nodes) node.disconnect();
  }
}

/** Delete every record under `prefix` (a test's own), on the server or the cluster. */
export async function sweep(cluster: boolean, prefix: string): Promise<void> {
  const keys = await keysUnder(cluster, prefix);
  if (keys.length === 0) return;
  const client = redisClient(cluster);
  try {
    // One DEL per key: on a cluster the keys lie in many slots.
    await Promise.all(keys.map((key) => client.del(key)));
  } finally {
    client.disconnect();
  }
}

/** A Redis server of one test's own (no persistence), which it may stop and start again. */
export interface PrivateRedis {
  readonly url: string;
  /** Kill it (as a crash does: nothing saved) and start it again on the same port, empty; resolves once it answers. */
  restart(): Promise<void>;
  stop(): Promise<void>;
}

/** A free loopback port, as the system hands one out. */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

export async function startPrivateRedis(): Promise<PrivateRedis> {
  const port = await freePort();
  let child: ChildProcess | undefined;
  const start = async () => {
    child = spawn(
      'redis-server',
      ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
      {
        stdio: 'ignore',
      },
    );
    for (let i = 0; i < 100; i++) {
      const probe = new Redis({ port, host: '127.0.0.1', ...probeOptions, lazyConnect: true });
      probe.on('error', () => {}); // not up yet: tried again
      try {
        await probe.connect();
        await probe.ping();
        return;
      } catch {
        await new Promise((resolve) => setTimeout(resolve, 50));
      } finally {
        probe.disconnect();
      }
    }
    throw new Error(`redis-server did not start on port ${port}`);
  };
  const kill = async () => {
    const running = child;
    if (running === undefined || running.exitCode !== null) return;
    const exited = new Promise((resolve) => running.once('exit', resolve));
    running.kill('SIGKILL');
    await exited;
  };
  await start();
  return {
    url: `redis://127.0.0.1:${port}`,
    async restart() {
      await kill();
      await start();
    },
    stop: kill,
  };
}
