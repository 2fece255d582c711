// The load the catalog benchmarks drive: unique namespace creates and table commits spread over many tables,
// keyed or not, with autocannon. Shared by `pnpm bench` (throughput ratios) and `pnpm loadtest` (latency).
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import autocannon from 'autocannon';
import { v7 } from 'uuid';

// Where taskset exists, each server gets its own core and this process (the load generator) another, so that
// they do not steal each other's time.
export const pinned = existsSync('/usr/bin/taskset');
if (pinned) spawnSync('/usr/bin/taskset', ['-pc', '1', String(process.pid)], { stdio: 'ignore' });

export interface Server {
  readonly url: string;
  /** The server's process (under taskset, taskset's own pid, which execs node in place: the same process). */
  readonly pid: number | undefined;
  stop(): Promise<void>;
}

/** A port nothing listens on now (the OS picks it). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const address = probe.address();
      probe.close(() => resolve(typeof address === 'object' && address !== null ? address.port : 0));
    });
  });
}

/** Start the built catalog (`dist/main.js`) on a free port with `env`, pinned to core 0. */
export async function startCatalog(env: Record<string, string>, core = 0): Promise<Server> {
  const main = new URL('../dist/main.js', import.meta.url).pathname;
  const port = String(await freePort());
  const settings = {
    ...process.env,
    HOST: '127.0.0.1',
    PORT: port,
    LOG_LEVEL: 'silent',
    WAREHOUSE: mkdtempSync(join(tmpdir(), 'idem-bench-warehouse-')),
    ...env,
  };
  // BENCH_NODE_ARGS: options for the server's node, such as `--cpu-prof --cpu-prof-dir=/tmp/prof`.
  const nodeArgs = process.env.BENCH_NODE_ARGS?.split(' ').filter(Boolean) ?? [];
  const command = [process.execPath, ...nodeArgs, main];
  const child: ChildProcess = pinned
    ? spawn('/usr/bin/taskset', ['-c', String(core), ...command], { env: settings, stdio: 'inherit' })
    : spawn(process.execPath, [...nodeArgs, main], { env: settings, stdio: 'inherit' });
  const url = `http://127.0.0.1:${port}`;
  // Ready, not just alive: the server listens before its database is open.
  for (let i = 0; ; i++) {
    if (
      await fetch(`${url}/ready`).then(
        (response) => response.ok,
        () => false,
      )
    )
      break;
    if (child.exitCode !== null) throw new Error(`the catalog exited with ${child.exitCode} while starting`);
    if (i > 400) throw new Error('the catalog did not become ready');
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return {
    url,
    pid: child.pid,
    stop: () =>
      new Promise<void>((resolve) => {
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}

export type Operation = 'create' | 'commit' | 'load';
const TABLES = 64;

/**
 * Create the namespace and the tables the commit load spreads over, each with `tableProperties` (a bounded
 * metadata log, for one).
 */
export async function prepare(url: string, tableProperties: Record<string, string> = {}): Promise<void> {
  const post = async (path: string, body: unknown) => {
    const response = await fetch(url + path, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    if (!response.ok)
      throw new Error(`prepare: POST ${path} answered ${response.status} ${await response.text()}`);
  };
  await post('/v1/namespaces', { namespace: ['bench'] });
  const schema = {
    type: 'struct',
    'schema-id': 0,
    fields: [{ id: 1, name: 'id', required: true, type: 'long' }],
  };
  for (let t = 0; t < TABLES; t++)
    await post('/v1/namespaces/bench/tables', { name: `t${t}`, schema, properties: tableProperties });
}

let counter = 0;
/**
 * The property the `n`th commit sets: a new one each time, or one of `properties` names, picked by the number of
 * commits its table has had (the tables take commits in turn, so `n % properties` would give each table one).
 */
const property = (n: number, properties: number) =>
  Number.isFinite(properties) ? Math.floor(n / TABLES) % properties : n;
/**
 * The next request of an operation: a unique namespace, a commit of a property to one of the tables (a new
 * property each time, or one of `properties` names with a new value), or a load of one of them.
 */
export function next(
  operation: Operation,
  properties = Number.POSITIVE_INFINITY,
): { method: 'POST' | 'GET'; path: string; body?: string } {
  const n = counter++;
  const table = `/v1/namespaces/bench/tables/t${n % TABLES}`;
  if (operation === 'create')
    return { method: 'POST', path: '/v1/namespaces', body: `{"namespace":["bench","n${n}-${process.pid}"]}` };
  if (operation === 'load') return { method: 'GET', path: table };
  return {
    method: 'POST',
    path: table,
    body: `{"requirements":[],"updates":[{"action":"set-properties","updates":{"p${property(n, properties)}":"${n}"}}]}`,
  };
}

export interface LoadResult {
  readonly requestsPerSecond: number;
  readonly latency: { readonly p50: number; readonly p95: number; readonly p99: number };
  readonly errors: number;
}

/**
 * Drive `operation` for `seconds`: as fast as `connections` allow, or at a fixed `rate` (requests per second, for
 * latency at a given load). `keyed`: every request carries a fresh Idempotency-Key; `retryShare`: that share of
 * requests resend the previous request with its key (a retry, answered by a replay).
 */
export async function drive(
  url: string,
  options: {
    operation: Operation;
    keyed: boolean;
    seconds: number;
    connections?: number;
    rate?: number;
    retryShare?: number;
    /** Commits set one of this many properties (a new value each time) instead of a new one each time. */
    properties?: number;
  },
): Promise<LoadResult> {
  let last: { method: 'POST' | 'GET'; path: string; body: string | undefined; key: string } | undefined;
  const times: number[] = [];
  const result = await new Promise<autocannon.Result>((resolve, reject) => {
    const instance = autocannon(
      {
        url,
        method: 'POST',
        connections: options.connections ?? 16,
        duration: options.seconds,
        ...(options.rate === undefined ? {} : { overallRate: options.rate }),
        headers: { 'content-type': 'application/json' },
        requests: [
          {
            // The request autocannon hands over is its own copy for this request: set on it, not spread into a
            // new one (a spread with fields after it costs Node 20 about a microsecond per field, and this
            // client must not be what limits the fastest runs).
            setupRequest: (request) => {
              const retry = last !== undefined && Math.random() < (options.retryShare ?? 0);
              let chosen: NonNullable<typeof last>;
              if (retry && last !== undefined) chosen = last;
              else {
                const fresh = next(options.operation, options.properties);
                chosen = { method: fresh.method, path: fresh.path, body: fresh.body, key: v7() };
              }
              last = chosen;
              request.method = chosen.method;
              request.path = chosen.path;
              if (chosen.body !== undefined) request.body = chosen.body;
              // (autocannon's headers are a fresh object per request)
              if (options.keyed) (request.headers as Record<string, string>)['idempotency-key'] = chosen.key;
              return request;
            },
          },
        ],
      },
      (error, done) => (error ? reject(error) : resolve(done)),
    );
    // Every response time, for exact percentiles (autocannon's own summary has no p95).
    instance.on('response', (_client: unknown, _status: number, _bytes: number, ms: number) =>
      times.push(ms),
    );
  });
  times.sort((a, b) => a - b);
  const at = (q: number) => times[Math.min(times.length - 1, Math.floor(q * times.length))] ?? Number.NaN;
  return {
    requestsPerSecond: result.requests.average,
    latency: { p50: at(0.5), p95: at(0.95), p99: at(0.99) },
    errors: result.non2xx + result.errors + result.timeouts,
  };
}
