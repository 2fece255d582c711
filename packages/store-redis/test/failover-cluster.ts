import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { sleep, until } from './support/private-servers.js';

const run = promisify(execFile);
const clusterScript = fileURLToPath(new URL('../../../scripts/redis-cluster.sh', import.meta.url));

/** How long a node may not answer before the others fail it and its replica is elected, in ms. */
export const NODE_TIMEOUT_MS = 1_000;

/** One node as `CLUSTER NODES` describes it. */
export interface NodeView {
  readonly id: string;
  readonly port: number;
  readonly master: boolean;
  readonly failed: boolean;
  /** The master's id, for a replica. */
  readonly masterId: string | undefined;
  readonly slots: readonly (readonly [number, number])[];
}

/** Redis Cluster's slot of a key: CRC16 (XMODEM) of its hash tag, or of the whole key, mod 16384. */
export function keySlot(key: string): number {
  const open = key.indexOf('{');
  const close = open === -1 ? -1 : key.indexOf('}', open + 1);
  const hashed = close > open + 1 ? key.slice(open + 1, close) : key;
  let crc = 0;
  for (const byte of Buffer.from(hashed)) {
    crc ^= byte << 8;
    for (let bit = 0; bit < 8; bit++)
      crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc % 16384;
}

const probe = (port: number) => {
  const client = new Redis({ port, host: '127.0.0.1', retryStrategy: () => null, maxRetriesPerRequest: 0 });
  client.on('error', () => {}); // a node that is down is reported by the failing call
  return client;
};

async function ask<T>(port: number, call: (client: Redis) => Promise<T>): Promise<T> {
  const client = probe(port);
  try {
    return await call(client);
  } finally {
    client.disconnect();
  }
}

const free = (port: number) =>
  new Promise<boolean>((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });

/**
 * Six consecutive free ports whose cluster bus ports (+10000) are free too, from a random base: never the
 * shared cluster's, nor those of another run of this file at the same time.
 */
async function freePorts(): Promise<number[]> {
  for (let tries = 0; tries < 50; tries++) {
    const base = 30_000 + Math.floor(Math.random() * 10_000);
    const ports = Array.from({ length: 6 }, (_, i) => base + i);
    const checks = await Promise.all(ports.flatMap((port) => [free(port), free(port + 10_000)]));
    if (checks.every(Boolean)) return ports;
  }
  throw new Error('no six free loopback ports for the failover cluster');
}

/**
 * A Redis Cluster of this test file's own, 3 masters and a replica each on six free ports (never the shared
 * cluster other suites use at the same time), started by scripts/redis-cluster.sh in a temp dir, daemonized,
 * no persistence. `stop` shuts every node down and removes the directory.
 */
export async function startFailoverCluster() {
  const ports = await freePorts();
  const dir = mkdtempSync(join(tmpdir(), 'idem-failover-cluster-'));
  const env = {
    ...process.env,
    REDIS_CLUSTER_PORTS: ports.join(' '),
    REDIS_CLUSTER_REPLICAS: '1',
    REDIS_CLUSTER_NODE_TIMEOUT: String(NODE_TIMEOUT_MS),
    REDIS_CLUSTER_DIR: dir,
  };
  const script = async (...args: string[]) => run('bash', [clusterScript, ...args], { env, timeout: 60_000 });
  const pidOf = (port: number) => Number(readFileSync(join(dir, String(port), 'redis.pid'), 'utf8'));

  /** The cluster as one answering node sees it. */
  async function nodes(): Promise<NodeView[]> {
    for (const port of ports) {
      const text = await ask(port, async (c) => String(await c.cluster('NODES'))).catch(() => undefined);
      if (text === undefined) continue;
      return text
        .trim()
        .split('\n')
        .map((line) => {
          const [id = '', address = '', flags = '', masterId = '', , , , , ...slots] = line.split(' ');
          return {
            id,
            port: Number(/:(\d+)@/.exec(address)?.[1]),
            master: flags.split(',').includes('master'),
            failed: /fail/.test(flags),
            masterId: masterId === '-' ? undefined : masterId,
            slots: slots
              .filter((s) => /^\d/.test(s))
              .map((s) => {
                const [from = 0, to = from] = s.split('-').map(Number);
                return [from, to] as const;
              }),
          };
        });
    }
    throw new Error('no node of the failover cluster answers');
  }

  const role = (port: number) =>
    ask(port, async (c) => String((await c.call('ROLE')) as unknown[])).catch(() => '');

  /** Every node up, every master with a replica in sync, every node seeing cluster_state:ok. */
  async function healthy(): Promise<boolean> {
    const view = await nodes();
    if (view.length !== ports.length || view.some((n) => n.failed)) return false;
    const masters = view.filter((n) => n.master);
    if (masters.length !== 3 || masters.some((m) => !view.some((r) => r.masterId === m.id))) return false;
    for (const port of ports) {
      const [info, replication] = await ask(port, (c) =>
        Promise.all([c.cluster('INFO'), c.info('replication')]),
      ).catch(() => ['', '']);
      if (!String(info).includes('cluster_state:ok')) return false;
      if (replication.includes('role:slave') && !replication.includes('master_link_status:up')) return false;
      if (replication.includes('role:master') && !/slave0:.*state=online/.test(replication)) return false;
    }
    return true;
  }

  /** Every node killed (a stopped or hung one too: no shutdown to wait for), the directory removed. */
  async function stop(): Promise<void> {
    for (const port of ports) {
      try {
        process.kill(pidOf(port), 'SIGKILL');
      } catch {
        // never started, or already gone
      }
    }
    await script('stop').catch(() => {}); // any node whose pid file is missing
    rmSync(dir, { recursive: true, force: true });
  }

  try {
    await script();
    await until('the failover cluster to be healthy', healthy, 30_000);
  } catch (error) {
    await stop();
    throw error;
  }

  return {
    nodes: ports.slice(0, 3).map((port) => ({ host: '127.0.0.1', port })),
    view: nodes,
    healthy,
    /** The master serving `slot`, and its replica. */
    async pair(slot: number): Promise<{ master: NodeView; replica: NodeView }> {
      const view = await nodes();
      const master = view.find((n) => n.master && n.slots.some(([from, to]) => slot >= from && slot <= to));
      const replica = view.find((n) => n.masterId !== undefined && n.masterId === master?.id);
      if (master === undefined || replica === undefined) throw new Error(`no master and replica for ${slot}`);
      return { master, replica };
    },
    /** `kill -9` of the node on `port`: its memory and its replication buffer are gone. */
    kill(port: number): void {
      process.kill(pidOf(port), 'SIGKILL');
    },
    /**
     * Cut a master's replication link, as a partition between it and its replica would: the replica is
     * stopped (SIGSTOP, so that it cannot reconnect) and the master drops its replica connections. The master
     * goes on answering writes that reach no replica. `heal` lets the replica go on (SIGCONT).
     */
    async cutReplica(masterPort: number, replicaPort: number): Promise<() => void> {
      const pid = pidOf(replicaPort);
      process.kill(pid, 'SIGSTOP');
      await ask(masterPort, (c) => c.call('CLIENT', 'KILL', 'TYPE', 'replica'));
      return () => process.kill(pid, 'SIGCONT');
    },
    /** `CLUSTER FAILOVER` on a replica: its master stops writes, the replica catches up and takes over. */
    async failover(replicaPort: number): Promise<void> {
      await ask(replicaPort, (c) => c.cluster('FAILOVER'));
    },
    /** Wait until the node on `port` reports itself a master. */
    async promoted(port: number, timeoutMs = 20_000): Promise<void> {
      const deadline = Date.now() + timeoutMs;
      while (Date.now() < deadline) {
        if ((await role(port)).startsWith('master')) return;
        await sleep(20);
      }
      throw new Error(`${port} was not promoted within ${timeoutMs} ms`);
    },
    /** Start every node that is down again, from its directory: it rejoins as a replica of its successor. */
    async restart(): Promise<void> {
      await script();
    },
    stop,
  };
}

export type FailoverCluster = Awaited<ReturnType<typeof startFailoverCluster>>;
