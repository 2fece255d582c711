import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';

const run = promisify(execFile);
const clusterScript = fileURLToPath(new URL('../../../../scripts/redis-cluster.sh', import.meta.url));

const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => resolve(typeof address === 'object' && address !== null ? address.port : 0));
    });
  });

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export async function until(what: string, check: () => Promise<boolean>, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check().catch(() => false)) return;
    await sleep(100);
  }
  throw new Error(`${what} did not happen within ${timeoutMs} ms`);
}

/** Whether `redis-server` can be started here (the fault suites start servers of their own). */
export async function redisServerInstalled(): Promise<boolean> {
  try {
    await run('redis-server', ['--version']);
    return true;
  } catch (error) {
    const reason = `redis-server is not installed (${(error as Error).message})`;
    if (process.env.CI === 'true') throw new Error(`${reason}; under CI=true the fault suites must run`);
    console.warn(`skipping the Redis fault suites: ${reason}`);
    return false;
  }
}

/**
 * A standalone redis-server of this test file's own, so that CLIENT PAUSE and CLIENT KILL never touch the
 * server other suites share.
 */
export async function startPrivateRedis(
  replicaOf?: string,
): Promise<{ url: string; port: number; stop(): Promise<void> }> {
  const port = await freePort();
  // A directory of its own: a replica writes the master's snapshot there (dump.rdb), never into the checkout.
  const dir = mkdtempSync(join(tmpdir(), 'idem-redis-'));
  const child: ChildProcess = spawn(
    'redis-server',
    [
      ...['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir],
      ...(replicaOf === undefined ? [] : ['--replicaof', ...replicaOf.split(':')]),
    ],
    { stdio: 'ignore' },
  );
  const url = `redis://127.0.0.1:${port}`;
  await until(`redis-server on ${port}`, async () => {
    const probe = new Redis(url, { retryStrategy: () => null, maxRetriesPerRequest: 0 });
    probe.on('error', () => {}); // refused until the server listens
    try {
      return (await probe.ping()) === 'PONG';
    } finally {
      probe.disconnect();
    }
  });
  return {
    url,
    port,
    async stop() {
      child.kill('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A 3-master cluster of this test file's own (ports 7101-7103 unless told otherwise), in a temp dir. */
export async function startPrivateCluster(ports = [7101, 7102, 7103]) {
  const dir = mkdtempSync(join(tmpdir(), 'idem-fault-cluster-'));
  const env = { ...process.env, REDIS_CLUSTER_PORTS: ports.join(' '), REDIS_CLUSTER_DIR: dir };
  const script = async (...args: string[]) => run('bash', [clusterScript, ...args], { env, timeout: 60_000 });
  await script('stop'); // nodes a crashed run left on these ports would not join this cluster
  mkdirSync(dir, { recursive: true });
  await script();
  const nodes = ports.map((port) => ({ host: '127.0.0.1', port }));
  const state = async (port: number) => {
    const probe = new Redis({ port, retryStrategy: () => null, maxRetriesPerRequest: 0 });
    try {
      return /cluster_state:(\w+)/.exec(String(await probe.cluster('INFO')))?.[1];
    } finally {
      probe.disconnect();
    }
  };
  return {
    nodes,
    /** Kill one node the hard way (SHUTDOWN NOSAVE: its memory is lost) and wait until the cluster sees it. */
    async stopNode(port: number) {
      const node = new Redis({ port, retryStrategy: () => null });
      await node.call('SHUTDOWN', 'NOSAVE').catch(() => {});
      node.disconnect();
      const other = ports.find((p) => p !== port) as number;
      await until(`the cluster to notice ${port} is down`, async () => (await state(other)) === 'fail');
    },
    /** Start the stopped node again on its port, from its directory (same node id and slots). */
    async restartNode() {
      await script();
      await until('the cluster to be ok again', async () =>
        (await Promise.all(ports.map(state))).every((s) => s === 'ok'),
      );
    },
    async stop() {
      await script('stop');
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** The port of the master that `port`'s node says serves `slot`. */
async function slotOwner(port: number, slot: number): Promise<number | undefined> {
  const node = new Redis({ port, retryStrategy: () => null, maxRetriesPerRequest: 0 });
  node.on('error', () => {});
  try {
    const ranges = (await node.cluster('SLOTS')) as unknown as [number, number, [string, number]][];
    return ranges.find(([from, upTo]) => from <= slot && slot <= upTo)?.[2][1];
  } finally {
    node.disconnect();
  }
}

/**
 * Move the slot holding `name` from the master on `from` to the one on `to` while calls run, as `redis-cli
 * --cluster reshard` does: IMPORTING and MIGRATING, MIGRATE of the key, then NODE on every master, with pauses
 * between the steps so that the calls in flight meet ASK first and MOVED after.
 */
export async function moveSlot(
  slot: number,
  name: string,
  from: number,
  to: number,
  ports: readonly number[],
): Promise<void> {
  const [source, target] = [new Redis({ port: from }), new Redis({ port: to })];
  const idOf = async (node: Redis) => String(await node.cluster('MYID'));
  try {
    await sleep(100);
    await target.cluster('SETSLOT', slot, 'IMPORTING', await idOf(source));
    await source.cluster('SETSLOT', slot, 'MIGRATING', await idOf(target));
    await sleep(100);
    await source.call('MIGRATE', '127.0.0.1', String(to), '', '0', '5000', 'KEYS', name);
    await sleep(100);
    const targetId = await idOf(target);
    for (const port of ports) {
      const each = new Redis({ port });
      await each.cluster('SETSLOT', slot, 'NODE', targetId);
      each.disconnect();
    }
    // A node told early can take the slot back from the gossip of a master with a higher config epoch until
    // the target, told too, bumps its own: wait until every node says the target serves it.
    await until(`slot ${slot} to be served by ${to} on every node`, async () => {
      const views = await Promise.all(ports.map((port) => slotOwner(port, slot)));
      return views.every((owner) => owner === to);
    });
    await sleep(300);
  } finally {
    source.disconnect();
    target.disconnect();
  }
}
