import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnServer } from './process.js';
import { startTcpProxy, type TcpProxy } from './tcp-proxy.js';

/**
 * Short leases and timeouts, so that every fault resolves in about a second and the suite stays within CI's
 * time on 2 cores: the bounds a scenario asserts are these, not the defaults.
 */
export const CLUSTER_SETTINGS = {
  // One deadline per request, from its arrival: every answer a node gives comes within it (see
  // cluster-faults.test.ts, `healthy`). The other database bounds are at or below it, as in issue 18's run.
  REQUEST_TIMEOUT_MS: '2000',
  IDEMPOTENCY_LEASE_MS: '1500',
  IDEMPOTENCY_MAX_WAIT_MS: '1000',
  DATABASE_STATEMENT_TIMEOUT_MS: '2000',
  DATABASE_ACQUIRE_TIMEOUT_MS: '2000',
  DATABASE_IDLE_TRANSACTION_TIMEOUT_MS: '1000',
  DATABASE_RETRY_MAX_DELAY_MS: '400',
  HEALTH_TIMEOUT_MS: '500',
  SHUTDOWN_DRAIN_MS: '3000',
  IDEMPOTENCY_PURGE_ENABLED: 'false',
  AUDIT_LOG: 'false',
  METRICS_ENABLED: 'false',
  LOG_LEVEL: 'warn',
} as const;

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === 'string') throw new Error('no port');
  return address.port;
}

/** How a node process ended, and whether the test meant it to. */
export interface Exit {
  readonly node: number;
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly expected: boolean;
  readonly afterMs: number;
}

/** One catalog process on a fixed port, its database reached through its own proxy. */
export class ClusterNode {
  child: ChildProcess | undefined;
  /** The last lines it wrote (warnings and errors), for a failure's message. */
  readonly output: string[] = [];
  #expectExit = false;
  #exited: Promise<Exit> | undefined;

  constructor(
    readonly index: number,
    readonly port: number,
    readonly proxy: TcpProxy,
    private readonly env: Record<string, string>,
    private readonly exits: Exit[],
  ) {}

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** Start the process; resolves once it listens (its database may not be open yet: see `ready`). */
  async start(extraEnv: Record<string, string> = {}): Promise<void> {
    this.#expectExit = false;
    const startedMs = Date.now();
    const child = spawnServer({
      HOME: process.env.HOME ?? tmpdir(),
      HOST: '127.0.0.1',
      PORT: String(this.port),
      ...this.env,
      ...extraEnv,
    });
    this.child = child;
    const keep = (chunk: Buffer) => {
      for (const line of String(chunk).split('\n')) if (line !== '') this.output.push(line);
      if (this.output.length > 200) this.output.splice(0, this.output.length - 200);
    };
    child.stdout?.on('data', keep);
    child.stderr?.on('data', keep);
    this.#exited = new Promise<Exit>((resolve) =>
      child.once('exit', (code, signal) => {
        const exit = {
          node: this.index,
          code,
          signal,
          expected: this.#expectExit,
          afterMs: Date.now() - startedMs,
        };
        this.exits.push(exit);
        if (this.child === child) this.child = undefined;
        resolve(exit);
      }),
    );
    await this.waitFor('/live', 200, 30_000);
  }

  /** Wait until the node answers `path` with `status`. */
  async waitFor(path: string, status: number, timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (this.child === undefined) throw new Error(`node ${this.index} exited: ${this.output.join('\n')}`);
      const answered = await fetch(this.url + path, { signal: AbortSignal.timeout(2_000) }).then(
        (response) => response.status,
        () => undefined,
      );
      if (answered === status) return;
      if (Date.now() > deadline)
        throw new Error(`node ${this.index} did not answer ${path} ${status}: ${this.output.join('\n')}`);
      await sleep(100);
    }
  }

  ready(timeoutMs = 30_000): Promise<void> {
    return this.waitFor('/ready', 200, timeoutMs);
  }

  /** End the process with a signal the test means to send; resolves with its exit. */
  signal(signal: 'SIGKILL' | 'SIGTERM' | 'SIGINT'): Promise<Exit> | undefined {
    const child = this.child;
    if (child === undefined) return undefined;
    this.#expectExit = true;
    child.kill(signal);
    return this.#exited;
  }

  /** SIGSTOP: the process stalls (as in a long GC pause, or a VM frozen), its sockets left open. */
  pause(): void {
    this.child?.kill('SIGSTOP');
  }

  /** SIGCONT: the stalled process goes on where it was. */
  resume(): void {
    this.child?.kill('SIGCONT');
  }

  get running(): boolean {
    return this.child !== undefined;
  }
}

export interface Cluster {
  readonly nodes: readonly ClusterNode[];
  readonly warehouse: string;
  readonly exits: Exit[];
  /** The exits no test asked for. */
  unexpectedExits(): Exit[];
  close(): Promise<void>;
}

/** `count` catalog processes on one database, each through its own loopback proxy, sharing one warehouse. */
export async function startCluster(
  databaseUrl: string,
  options: { count?: number; env?: Record<string, string> } = {},
): Promise<Cluster> {
  const target = new URL(databaseUrl);
  const warehouse = mkdtempSync(join(tmpdir(), 'idem-cluster-warehouse-'));
  const exits: Exit[] = [];
  const nodes: ClusterNode[] = [];
  for (let i = 0; i < (options.count ?? 3); i++) {
    const proxy = await startTcpProxy({ host: target.hostname, port: Number(target.port) });
    const url = new URL(databaseUrl);
    url.host = `127.0.0.1:${proxy.port}`;
    const env = {
      ...CLUSTER_SETTINGS,
      DATABASE_URL: url.href,
      WAREHOUSE: warehouse,
      ...options.env,
    };
    nodes.push(new ClusterNode(i, await freePort(), proxy, env, exits));
  }
  await Promise.all(nodes.map((node) => node.start()));
  await Promise.all(nodes.map((node) => node.ready()));
  return {
    nodes,
    warehouse,
    exits,
    unexpectedExits: () => exits.filter((exit) => !exit.expected),
    async close() {
      await Promise.all(nodes.map((node) => node.signal('SIGKILL')));
      for (const node of nodes) await node.proxy.close();
      rmSync(warehouse, { recursive: true, force: true });
    },
  };
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** One attempt of one copy of a logical request. */
export interface Attempt {
  readonly node: number;
  readonly status?: number;
  readonly retryAfter?: string | null;
  /** The body's text, when answered. */
  readonly text?: string;
  /** The connection error instead of an answer (ECONNREFUSED, ECONNRESET, a timeout). */
  readonly error?: string;
  readonly ms: number;
}

/** Counts over a scenario's attempts, for its assertions and its report. */
export interface Tally {
  logical: number;
  attempts: number;
  answered503: number;
  without503RetryAfter: number;
  other5xx: number;
  connectionErrors: number;
  /** Connection errors by code (ECONNREFUSED while a node restarts, ECONNRESET, …). */
  errors: Record<string, number>;
  /** The slowest answer (an error included), in ms. */
  slowestMs: number;
  wrongAnswers: number;
  lost: number;
}

export const newTally = (): Tally => ({
  logical: 0,
  attempts: 0,
  answered503: 0,
  without503RetryAfter: 0,
  other5xx: 0,
  connectionErrors: 0,
  errors: {},
  slowestMs: 0,
  wrongAnswers: 0,
  lost: 0,
});

/** Send one attempt: an answer, or the connection error that came instead. */
export async function attempt(
  node: ClusterNode,
  method: string,
  path: string,
  key: string,
  body: unknown,
  timeoutMs = 15_000,
): Promise<Attempt> {
  const startedMs = Date.now();
  try {
    const response = await fetch(node.url + path, {
      method,
      headers: { 'content-type': 'application/json', 'idempotency-key': key },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(timeoutMs),
    });
    const text = await response.text();
    return {
      node: node.index,
      status: response.status,
      retryAfter: response.headers.get('retry-after'),
      text,
      ms: Date.now() - startedMs,
    };
  } catch (error) {
    const cause = (error as { cause?: { code?: string } }).cause;
    return {
      node: node.index,
      error: cause?.code ?? (error as Error).name,
      ms: Date.now() - startedMs,
    };
  }
}

/** An attempt whose answer is final: anything but a 503 or a connection error. */
export const isFinal = (answer: Attempt) => answer.status !== undefined && answer.status !== 503;

export function count(tally: Tally, answer: Attempt): void {
  tally.attempts++;
  tally.slowestMs = Math.max(tally.slowestMs, answer.ms);
  if (answer.status === undefined) {
    tally.connectionErrors++;
    const code = answer.error ?? 'unknown';
    tally.errors[code] = (tally.errors[code] ?? 0) + 1;
  } else if (answer.status === 503) {
    tally.answered503++;
    if (answer.retryAfter === null || answer.retryAfter === undefined) tally.without503RetryAfter++;
  } else if (answer.status >= 500) tally.other5xx++;
}

/**
 * A logical request as a careful client sends it: three copies at once with one key, one per node, each
 * retried with the same key (on the next node, after a short pause) until it gets a final answer. Returns the
 * final answer of each copy; a copy with none within `deadlineMs` is lost.
 */
export async function logical(
  cluster: Cluster,
  tally: Tally,
  request: { method: string; path: string; key: string; body: unknown },
  deadlineMs = 60_000,
): Promise<Attempt[] | undefined> {
  tally.logical++;
  const until = Date.now() + deadlineMs;
  const copy = async (first: number): Promise<Attempt | undefined> => {
    // A node that died on its own fails the scenario: no use retrying against a cluster that is going down.
    for (let i = 0; Date.now() < until && cluster.unexpectedExits().length === 0; i++) {
      const node = cluster.nodes[(first + i) % cluster.nodes.length] as ClusterNode;
      const answer = await attempt(node, request.method, request.path, request.key, request.body);
      count(tally, answer);
      if (isFinal(answer)) return answer;
      await sleep(50 + Math.random() * 150);
    }
    return undefined;
  };
  const finals = await Promise.all(cluster.nodes.map((_, i) => copy(i)));
  if (finals.some((answer) => answer === undefined)) {
    tally.lost++;
    return undefined;
  }
  const answers = finals as Attempt[];
  const first = answers[0] as Attempt;
  if (answers.some((answer) => answer.status !== first.status || answer.text !== first.text))
    tally.wrongAnswers++;
  return answers;
}

/** Run `tasks` with at most `width` at once. */
export async function pool<T>(tasks: readonly (() => Promise<T>)[], width: number): Promise<T[]> {
  const results: T[] = new Array(tasks.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(width, tasks.length) }, async () => {
      while (next < tasks.length) {
        const index = next++;
        results[index] = await (tasks[index] as () => Promise<T>)();
      }
    }),
  );
  return results;
}
