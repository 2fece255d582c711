import { type ChildProcess, type SpawnOptions, spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import autocannon from 'autocannon';
import { v7 } from 'uuid';
import { cpuTicks, printTable, ratio, TICK_US } from './bench.js';

/** A fresh UUIDv7 key, as a client mints one. */
export const uuidv7 = (): string => v7();

/** The request body of every run: an order of 230 bytes of JSON, the same in every variant. */
export const orderBody = JSON.stringify({
  item: 'book',
  customerId: 'cus_4f9a2c7e',
  currency: 'EUR',
  lines: [
    { sku: 'BOOK-0451', quantity: 1, unitPrice: 1299 },
    { sku: 'PEN-002', quantity: 2, unitPrice: 850 },
  ],
  shipping: { method: 'post', postcode: '75011', country: 'FR' },
});

/** Connections autocannon keeps open in every run. */
export const connections = 16;

// Where taskset exists, the server gets core 0 and this process (the load generator) core 1, so that the two
// do not steal each other's time.
const pinned = existsSync('/usr/bin/taskset');
if (pinned) spawnSync('/usr/bin/taskset', ['-pc', '1', String(process.pid)], { stdio: 'ignore' });

/**
 * Start `tsx <script> <variant>` in its own process (pinned to its own core), with `env` added to its
 * environment, and wait for the port it prints.
 */
export async function startServer(
  script: string,
  variant: string,
  env: Readonly<Record<string, string>> = {},
): Promise<{ url: string; child: ChildProcess }> {
  const command = [process.execPath, '--import', 'tsx', script, variant];
  const options: SpawnOptions = { stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, ...env } };
  const child = pinned
    ? spawn('/usr/bin/taskset', ['-c', '0', ...command], options)
    : spawn(process.execPath, command.slice(1), options);
  const port = await new Promise<string>((resolve, reject) => {
    child.stdout?.once('data', (data: Buffer) => resolve(data.toString().trim()));
    child.once('exit', (code) => reject(new Error(`server ${variant} exited with ${code}`)));
  });
  return { url: `http://127.0.0.1:${port}`, child };
}

/**
 * Requests per second of POST /orders with {@link orderBody}; `key` chooses the Idempotency-Key per request.
 * `total`: the number of requests answered instead.
 */
export async function load(
  url: string,
  key: (() => string) | undefined,
  seconds: number,
  total = false,
): Promise<number> {
  const result = await autocannon({
    url: `${url}/orders`,
    method: 'POST',
    connections,
    duration: seconds,
    headers: { 'content-type': 'application/json' },
    body: orderBody,
    requests: [
      {
        // Set on the request autocannon copied for this one (its headers too), not spread into a new one: a
        // spread with fields after it costs Node 20 about a microsecond per field, in the load generator.
        setupRequest: (request) => {
          if (key !== undefined) (request.headers as Record<string, string>)['idempotency-key'] = key();
          return request;
        },
        // (The plain servers get keys too, ignored: the client then does the same work in every run.)
      },
    ],
  });
  if (result.non2xx > 0 || result.errors > 0) {
    throw new Error(`${result.non2xx} non-2xx answers and ${result.errors} errors`);
  }
  return total ? result.requests.total : result.requests.average;
}

/** One POST /orders with {@link orderBody} and `key`: its status, content type and body. */
export async function post(
  url: string,
  key: string,
): Promise<{ status: number; type: string; body: string }> {
  const response = await fetch(`${url}/orders`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': key },
    body: orderBody,
  });
  return {
    status: response.status,
    type: response.headers.get('content-type') ?? '',
    body: await response.text(),
  };
}

/** How many times the server's handler has run (its GET /count). */
export async function handlerRuns(url: string): Promise<number> {
  return ((await (await fetch(`${url}/count`)).json()) as { orders: number }).orders;
}

/**
 * Before a variant is measured, check that it does what its figure claims, so that a broken glue cannot give a
 * fast wrong number: a fresh key answers 201; with `idempotent`, the same key again is a replay (same status,
 * content type and body, and the handler did not run a second time), and another fresh key runs the handler.
 */
export async function selfCheck(url: string, variant: string, idempotent: boolean): Promise<void> {
  const fail = (what: string): never => {
    throw new Error(`self-check of ${variant}: ${what}`);
  };
  const before = await handlerRuns(url);
  const key = uuidv7();
  const first = await post(url, key);
  if (first.status !== 201) fail(`a fresh key answered ${first.status} ${first.body}`);
  if (!idempotent) return;
  const again = await post(url, key);
  if (again.status !== first.status || again.type !== first.type || again.body !== first.body) {
    fail(`the repeat answered ${again.status} ${again.type} ${again.body}, not ${first.type} ${first.body}`);
  }
  if ((await handlerRuns(url)) !== before + 1) fail('the handler ran again for the repeated key');
  const other = await post(url, uuidv7());
  if (other.status !== 201 || other.body === first.body)
    fail(`another key answered ${other.status} ${other.body}`);
}

/** A measured run: the server variant (argv[2] of the script), the key per request, and whether to check replays. */
export interface ServerRun {
  variant: string;
  key?: () => string;
  /** The variant claims idempotency: {@link selfCheck} checks that a repeated key is replayed. */
  idempotent?: boolean;
  /** A key sent once before the load (for a run that replays one key: the load then only replays). */
  prime?: string;
  /** Environment variables added to the server's (a switch its script reads: one piece taken out, say). */
  env?: Readonly<Record<string, string>>;
  /** Another server script for this run (the same server in another checkout: a build before a change). */
  script?: string;
}

/** A run that replays one key on `variant`: the key is completed once before the load, then only replayed. */
export function replayRun(variant: string): ServerRun {
  const key = uuidv7();
  return { variant, key: () => key, idempotent: true, prime: key };
}

/**
 * Load before a run is measured, in seconds: until the JIT has compiled the hot paths of every variant. The
 * server's core also runs the compiler, so a variant with more code warms up for longer: on Fastify idem's first
 * second cost 213 µs of CPU per request against the floor's 82, its second 72 against 48, both steady from the
 * third (55 and 40). With a 1 s warm-up, a 5 s run measured part of that and read the ratio low.
 */
const WARM_UP_SECONDS = 3;

/**
 * Measure every run in `rounds` rounds, the runs alternating within each round (forward in even rounds,
 * backward in odd ones, so that drift over the run hits every variant alike), each measurement in a fresh
 * server process: self-check, the `prime` key if any, a warm-up of {@link WARM_UP_SECONDS}, then `seconds` of
 * load. Returns each run's requests per second in every round, in the order of the rounds.
 */
export async function measureServers(
  script: string,
  runs: Record<string, ServerRun>,
  seconds: number,
  rounds: number,
): Promise<Record<string, number[]>> {
  const results: Record<string, number[]> = Object.fromEntries(Object.keys(runs).map((name) => [name, []]));
  const names = Object.keys(runs);
  for (let round = 0; round < rounds; round++) {
    for (const name of round % 2 === 0 ? names : [...names].reverse()) {
      const run = runs[name] as ServerRun;
      const { url, child } = await startServer(run.script ?? script, run.variant, run.env);
      try {
        await selfCheck(url, name, run.idempotent ?? false);
        if (run.prime !== undefined) await post(url, run.prime);
        await load(url, run.key, WARM_UP_SECONDS);
        results[name]?.push(await load(url, run.key, seconds));
      } finally {
        child.kill();
      }
    }
  }
  return results;
}

const mean = (values: number[]): number => values.reduce((sum, value) => sum + value, 0) / values.length;

/**
 * The standard comparison of an adapter benchmark, in one run: the bare server (`plain`), the server with idem
 * on unique keys, idem replaying one key, and the `extra` runs (the floor, the peers), measured in rounds as
 * {@link measureServers} does (`BENCH_ROUNDS`, default 2). Returns the mean requests per second over the rounds
 * by name, and `rounds`, each run's figure per round.
 */
export async function compareWithBare(
  script: string,
  extra: Record<string, ServerRun>,
  seconds: number,
  rounds = Number(process.env.BENCH_ROUNDS ?? 2),
): Promise<{
  rps: Record<string, number> & { plain: number; idem: number; replay: number };
  rounds: Record<string, number[]>;
}> {
  const perRound = await measureServers(
    script,
    {
      plain: { variant: 'plain', key: uuidv7 },
      ...extra,
      idem: { variant: 'idem', key: uuidv7, idempotent: true },
      replay: replayRun('idem'),
    },
    seconds,
    rounds,
  );
  const rps = Object.fromEntries(Object.entries(perRound).map(([name, values]) => [name, mean(values)]));
  return {
    rps: { ...rps, plain: rps.plain as number, idem: rps.idem as number, replay: rps.replay as number },
    rounds: perRound,
  };
}

/** `n` requests per second, then its ratio to each figure of `to` by name: `9,000 /s = 0.90x bare, 1.10x floor`. */
export function against(n: number, to: Record<string, number>): string {
  const ratios = Object.entries(to).map(([name, value]) => `${(n / value).toFixed(2)}x ${name}`);
  return `${Math.round(n).toLocaleString('en-US')} /s = ${ratios.join(', ')}`;
}

/** The rows of the per-round table: each run's requests per second in every round. */
export function roundRows(rounds: Record<string, number[]>): [string, string][] {
  return Object.entries(rounds).map(([name, values]) => [
    name,
    values.map((value) => `${Math.round(value).toLocaleString('en-US')} /s`).join(', '),
  ]);
}

/** CPU time per request of `b` over that of `a`: the median over the windows, and each window's figure. */
export interface CpuRatio {
  readonly median: number;
  readonly windows: number[];
  /** The median CPU time per request of `a` and of `b`, µs. */
  readonly microseconds: [number, number];
}

/**
 * The median; of an even count, the mean of the two middle values. (The lower of the two, as before, leaned every
 * printed ratio of A over B the same way: up, for the benches' floor over idem.)
 */
const median = (values: readonly number[]): number => {
  const sorted = [...values].sort((x, y) => x - y);
  const middle = sorted.length >> 1;
  return sorted.length % 2 === 1
    ? (sorted[middle] as number)
    : ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2;
};

/**
 * CPU time per request of `b` over that of `a`, both servers up at once on the same core and loaded **in
 * turns**: `a` alone for `seconds`, then `b` alone (the order flipped every window), `windows` times, after 4 s
 * of warm-up each. Each server has the core to itself while it is measured, as a server in production has, and
 * the two windows of a pair are seconds apart, so that the machine's drift hits both alike. A window's figure is
 * `(b's CPU ÷ b's requests) ÷ (a's CPU ÷ a's requests)`; CPU is user + system time from `/proc`, so a server the
 * load generator cannot saturate is measured by its cost, not its rate. `undefined` where `/proc` is not there.
 *
 * With `processes` above 1, the windows are split over that many fresh pairs of servers, one pair after
 * another: one process of a build can sit 10–15 % off another of the same build (where its code and heap
 * landed), and every window of one pair shares that luck, however alike its windows read.
 */
export async function turnsCpuRatio(
  script: string,
  a: ServerRun,
  b: ServerRun,
  { windows = 12, seconds = 2, processes = 1 } = {},
): Promise<CpuRatio | undefined> {
  for (const [name, value] of [
    ['windows', windows],
    ['processes', processes],
  ] as const) {
    if (!(Number.isSafeInteger(value) && value > 0)) {
      throw new RangeError(`${name} must be a positive integer, got ${value}`);
    }
  }
  const figures: number[] = [];
  const costs: [number[], number[]] = [[], []];
  // The windows as evenly as they go (12 over 5 pairs is 3, 3, 2, 2, 2); no pair for no window.
  for (let pair = 0; pair < Math.min(processes, windows); pair++) {
    const share = Math.floor(windows / processes) + (pair < windows % processes ? 1 : 0);
    const measured = await turnsOfOnePair(script, [a, b], share, seconds, figures, costs);
    if (!measured) return undefined;
  }
  return { median: median(figures), windows: figures, microseconds: [median(costs[0]), median(costs[1])] };
}

/**
 * Start one server of each run, or none: when one fails to start, the others are stopped before the failure is
 * thrown (a server left behind would keep its core busy under the next measurement).
 */
async function startServers(script: string, runs: readonly ServerRun[]) {
  const started = await Promise.allSettled(
    runs.map((run) => startServer(run.script ?? script, run.variant, run.env)),
  );
  const failed = started.find((result) => result.status === 'rejected');
  if (failed === undefined) {
    return started.map(
      (result) => (result as PromiseFulfilledResult<Awaited<ReturnType<typeof startServer>>>).value,
    );
  }
  for (const result of started) if (result.status === 'fulfilled') result.value.child.kill();
  throw (failed as PromiseRejectedResult).reason;
}

/**
 * One fresh pair of servers for {@link turnsCpuRatio}: `windows` figures added to `figures`; `false` without
 * `/proc`. Which server a window loads first follows the count of all figures so far, so that it alternates
 * across pairs too.
 */
async function turnsOfOnePair(
  script: string,
  runs: [ServerRun, ServerRun],
  windows: number,
  seconds: number,
  figures: number[],
  costs: [number[], number[]],
): Promise<boolean> {
  const servers = await startServers(script, runs);
  const first = figures.length;
  try {
    // (Under taskset, the child's pid is taskset's, which execs node in place: the same process.)
    const costOf = async (i: number, duration: number): Promise<number | undefined> => {
      const server = servers[i] as Awaited<ReturnType<typeof startServer>>;
      const pid = server.child.pid as number;
      const before = cpuTicks(pid);
      const requests = await load(server.url, (runs[i] as ServerRun).key, duration, true);
      const after = cpuTicks(pid);
      return before === undefined || after === undefined ? undefined : (after - before) / requests;
    };
    // Warm: the JIT has compiled the hot paths, and a bounded store is full (evicting, as it will be from then on).
    for (const i of first % 2 === 0 ? [0, 1] : [1, 0]) await costOf(i, 4);
    for (let window = first; window < first + windows; window++) {
      const order = window % 2 === 0 ? [0, 1] : [1, 0];
      const cost: (number | undefined)[] = [];
      for (const i of order) cost[i] = await costOf(i, seconds);
      if (cost[0] === undefined || cost[1] === undefined) return false;
      figures.push(cost[1] / cost[0]);
      costs[0].push(cost[0] * TICK_US);
      costs[1].push(cost[1] * TICK_US);
    }
    return true;
  } finally {
    for (const server of servers) server.child.kill();
  }
}

/**
 * CPU time per request of `b` over that of `a`, measured with both servers running **at once** on the same
 * core under the same load (one load generator per server, `connections` each, from this process). Each of
 * `pairs` fresh pairs is loaded for 2 s, then measured in `windows` windows of `seconds`. The two processes
 * take the core from each other thousands of times a second, and the one with the larger working set pays
 * more for the caches the other left cold: a cost no server alone on its core pays (on Fastify the floor's CPU
 * per request was 1–8 % higher at once than in turns, idem's 15–16 %), so {@link turnsCpuRatio} is the figure;
 * this one is printed beside it.
 */
export async function atOnceCpuRatio(
  script: string,
  a: ServerRun,
  b: ServerRun,
  { pairs = 2, windows = 5, seconds = 2 } = {},
): Promise<CpuRatio | undefined> {
  const figures: number[] = [];
  const costs: [number[], number[]] = [[], []];
  for (let pair = 0; pair < pairs; pair++) {
    const [first, second] = (await startServers(script, [a, b])) as [
      Awaited<ReturnType<typeof startServer>>,
      Awaited<ReturnType<typeof startServer>>,
    ];
    try {
      const pids = [first.child.pid as number, second.child.pid as number];
      const runBoth = (duration: number) =>
        Promise.all([load(first.url, a.key, duration, true), load(second.url, b.key, duration, true)]);
      await runBoth(2);
      for (let window = 0; window < windows; window++) {
        const before = pids.map(cpuTicks);
        const [requestsA, requestsB] = await runBoth(seconds);
        const after = pids.map(cpuTicks);
        if (before.includes(undefined) || after.includes(undefined)) return undefined;
        const used = after.map((ticks, i) => (ticks as number) - (before[i] as number));
        figures.push((used[1] as number) / requestsB / ((used[0] as number) / requestsA));
        costs[0].push(((used[0] as number) / requestsA) * TICK_US);
        costs[1].push(((used[1] as number) / requestsB) * TICK_US);
      }
    } finally {
      first.child.kill();
      second.child.kill();
    }
  }
  return { median: median(figures), windows: figures, microseconds: [median(costs[0]), median(costs[1])] };
}

/**
 * Print the CPU time per request of `a` (the floor) over `b` (idem), the way the rate ratios above it read:
 * {@link turnsCpuRatio} (the figure) and {@link atOnceCpuRatio}, each with every window's figure; nothing where
 * `/proc` cannot be read.
 */
export async function printPairedCpu(script: string, a: ServerRun, b: ServerRun, label = ''): Promise<void> {
  // Three fresh pairs of servers, four windows each: one pair's luck is not the figure.
  const turns = await turnsCpuRatio(script, a, b, { processes: 3 });
  const atOnce = await atOnceCpuRatio(script, a, b);
  if (turns === undefined || atOnce === undefined) return;
  const windows = (ratios: CpuRatio) => ratios.windows.map((figure) => (1 / figure).toFixed(2)).join(', ');
  const costs = ({ microseconds: [floor, idem] }: CpuRatio) =>
    `floor ${floor.toFixed(1)} µs, @idem ${idem.toFixed(1)} µs (medians)`;
  printTable(
    `CPU time per request${label}, floor ÷ @idem (as "@idem / floor" above), both servers up on one core`,
    [
      [
        'loaded in turns, each alone (median of 12 pairs of 2 s windows, 3 pairs of processes)',
        ratio(1 / turns.median),
      ],
      ['  each pair', windows(turns)],
      ['  CPU per request', costs(turns)],
      ['loaded at once, sharing the core (median of 2 pairs × 5 windows of 2 s)', ratio(1 / atOnce.median)],
      ['  each window', windows(atOnce)],
      ['  CPU per request', costs(atOnce)],
    ],
  );
}
