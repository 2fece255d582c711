// pnpm bench: the catalog's throughput with and without Idempotency-Key, side by side in one run, for
// namespace creates and table commits, on SQLite and PostgreSQL, and replays of one key (every request a
// retry of the same create) against creates without a key, also with the per-node replay cache
// (IDEMPOTENCY_REPLAY_CACHE_ENTRIES), and keyed creates and replays with the read before the transaction set
// the other way from the database's default (IDEMPOTENCY_READ_BEFORE_TRANSACTION: on SQLite, off elsewhere).
// The server runs on core 0, autocannon on core 1. Each variant runs once per round (BENCH_ROUNDS, default
// 2), in alternating order (forward, then backward), each in a fresh database and server process; the figures
// are the means over the rounds, so that drift over the run hits every variant alike. Last, for each
// database, what the key statements add to a create on the bare driver (key-floor.ts).
import { tmpdir } from 'node:os';
import { cpuTicks, machine, perSecond, printTable, ratio, TICK_US } from '../../../scripts/bench.js';
import type { Dialect } from '../src/database/catalog-schema.js';
import { readsBeforeTransactionByDefault } from '../src/idempotency/plugin.js';
import { freshPostgres } from '../test/support/databases.js';
import { drive, type Operation, prepare, startCatalog } from './catalog-load.js';
import { keyFloor } from './key-floor.js';

const seconds = Number(process.env.BENCH_SECONDS ?? 5);
const rounds = Number(process.env.BENCH_ROUNDS ?? 2);
const databases = (process.env.BENCH_DATABASES ?? 'sqlite,postgres').split(',');
const operations = (process.env.BENCH_OPERATIONS ?? 'create,commit').split(',') as Operation[];
/** How many properties a commit sets one of, and how many earlier metadata files a table's log keeps. */
const COMMIT_PROPERTIES = 32;

/** Whether the server reads a key's record before its transaction by default on `database`. */
const readsFirst = (database: string) => readsBeforeTransactionByDefault(database as Dialect);

/**
 * A variant: keyed or not, every request a retry of the one before (replays), the replay cache on, the read
 * before the transaction set the other way from the database's default (IDEMPOTENCY_READ_BEFORE_TRANSACTION).
 */
interface Variant {
  readonly keyed: boolean;
  readonly replays?: true;
  readonly cache?: true;
  readonly otherRead?: true;
}

async function measure(database: string, operation: Operation, name: string, variant: Variant) {
  const pg = database === 'postgres' ? await freshPostgres() : undefined;
  const server = await startCatalog({
    DATABASE_URL:
      pg?.url ?? `sqlite:${tmpdir()}/idem-bench-${process.pid}-${name}-${operation}-${Date.now()}.db`,
    ...(variant.cache === true ? { IDEMPOTENCY_REPLAY_CACHE_ENTRIES: '10000' } : {}),
    ...(variant.otherRead === true
      ? { IDEMPOTENCY_READ_BEFORE_TRANSACTION: String(!readsFirst(database)) }
      : {}),
  });
  try {
    // Commits at a steady size: each table's metadata holds at most COMMIT_PROPERTIES properties and as many
    // earlier files in its log, reached within the warm-up (TABLES × COMMIT_PROPERTIES commits). With a new
    // property per commit and the default log of 100 files, a table grew with every commit, so a faster
    // variant ended a run on larger tables and paid more per commit than a slower one.
    await prepare(server.url, { 'write.metadata.previous-versions-max': String(COMMIT_PROPERTIES) });
    const load = {
      operation,
      keyed: variant.keyed,
      retryShare: variant.replays === true ? 1 : 0,
      properties: COMMIT_PROPERTIES,
    };
    await drive(server.url, { ...load, seconds: operation === 'commit' ? 4 : 1 }); // warm-up
    const before = server.pid === undefined ? undefined : cpuTicks(server.pid);
    const result = await drive(server.url, { ...load, seconds });
    const after = server.pid === undefined ? undefined : cpuTicks(server.pid);
    if (result.errors > 0) throw new Error(`${result.errors} errors in ${name} ${operation}`);
    // The server's CPU time per request: where the load generator, not the server, sets the rate (it cannot
    // drive much past 11,000–13,000 /s from this machine's other core), the rate ratio understates the
    // cheaper side.
    const requests = result.requestsPerSecond * seconds;
    const cpuUs =
      before === undefined || after === undefined ? Number.NaN : ((after - before) * TICK_US) / requests;
    return { rate: result.requestsPerSecond, cpuUs };
  } finally {
    await server.stop();
    await pg?.drop();
  }
}

const mean = (values: readonly number[]) => values.reduce((sum, value) => sum + value, 0) / values.length;

console.log(`machine: ${machine()}`);
for (const database of databases) {
  const rows: [string, string][] = [];
  const perRound: [string, string][] = [];
  let createCpu: number | undefined;
  for (const operation of operations) {
    // Creates also measure replays: every request the retry of one create, with its key, from 16 connections.
    const variants: Record<string, Variant> = {
      plain: { keyed: false },
      keyed: { keyed: true },
      ...(operation === 'create'
        ? {
            replay: { keyed: true, replays: true },
            replayCached: { keyed: true, replays: true, cache: true },
            // What the read before the transaction trades: a fresh key pays it, a retry skips the
            // transaction.
            keyedOtherRead: { keyed: true, otherRead: true },
            replayOtherRead: { keyed: true, replays: true, otherRead: true },
          }
        : {}),
    };
    const names = Object.keys(variants);
    const measured: Record<string, { rate: number; cpuUs: number }[]> = Object.fromEntries(
      names.map((name) => [name, []]),
    );
    for (let round = 0; round < rounds; round++) {
      for (const name of round % 2 === 0 ? names : [...names].reverse()) {
        measured[name]?.push(await measure(database, operation, name, variants[name] as Variant));
      }
    }
    const rate = (name: string) => mean((measured[name] ?? []).map((run) => run.rate));
    const cpu = (name: string) => mean((measured[name] ?? []).map((run) => run.cpuUs));
    const plain = rate('plain');
    if (operation === 'create') createCpu = cpu('plain');
    /** A variant's rate and CPU per request, each against the unkeyed variant's (CPU: its µs over this one's). */
    const against = (name: string, of: string) =>
      `${perSecond(rate(name))}  (${ratio(rate(name) / plain)} of ${of}; CPU per request ${cpu(name).toFixed(0)} µs, ${ratio(cpu('plain') / cpu(name))})`;
    rows.push([
      `${operation}: without a key`,
      `${perSecond(plain)}  (CPU per request ${cpu('plain').toFixed(0)} µs)`,
    ]);
    rows.push([`${operation}: with a key`, against('keyed', 'without')]);
    if (measured.replay !== undefined)
      rows.push([`${operation}: replays of one key`, against('replay', 'creates without a key')]);
    if (measured.replayCached !== undefined)
      rows.push([
        `${operation}: replays of one key, replay cache on`,
        against('replayCached', 'creates without a key'),
      ]);
    const other = `the read before the transaction ${readsFirst(database) ? 'off' : 'on'}`;
    if (measured.keyedOtherRead !== undefined)
      rows.push([`${operation}: with a key, ${other}`, against('keyedOtherRead', 'without')]);
    if (measured.replayOtherRead !== undefined)
      rows.push([
        `${operation}: replays of one key, ${other}`,
        against('replayOtherRead', 'creates without a key'),
      ]);
    for (const name of names)
      perRound.push([
        `${operation} ${name}`,
        (measured[name] ?? []).map((run) => `${perSecond(run.rate)} ${run.cpuUs.toFixed(0)} µs`).join(', '),
      ]);
  }
  printTable(
    `reference server on ${database}, mean of ${rounds} rounds of ${seconds} s: the rate, and the server's CPU time per request (the ratio: without a key's over this one's)`,
    rows,
  );
  printTable(
    `requests per second and CPU per request in each round (rounds 2, 4, … run the variants in reverse order)`,
    perRound,
  );
  if (createCpu !== undefined) await printKeyFloor(database, createCpu);
}

/**
 * What the goal of 0.8x leaves a keyed create: the key statements on the bare driver (key-floor.ts), against
 * this run's unkeyed create (`unkeyedCpu`, µs of the server's CPU per request).
 */
async function printKeyFloor(database: string, unkeyedCpu: number): Promise<void> {
  let floor: Awaited<ReturnType<typeof keyFloor>>;
  try {
    floor = await keyFloor(database);
  } catch (error) {
    console.log(`\nthe key statements on ${database} could not be measured: ${error}`);
    return;
  }
  const line = (label: string, cpu: number): [string, string] => {
    const added = cpu - floor.unkeyed;
    return [
      label,
      `${cpu.toFixed(0)} µs (+${added.toFixed(0)}): with nothing else added, keyed creates' CPU ratio (unkeyed ÷ keyed per request) at most ${Number.isNaN(unkeyedCpu) ? 'n/a' : ratio(unkeyedCpu / (unkeyedCpu + added))}`,
    ];
  };
  printTable(
    `the key statements on ${database}'s bare driver (key-floor.ts): µs of CPU per transaction, against this run's unkeyed create (${Number.isNaN(unkeyedCpu) ? 'n/a' : unkeyedCpu.toFixed(0)} µs per request)`,
    [
      ["a create's statements", `${floor.unkeyed.toFixed(0)} µs`],
      line('with the key statements', floor.keyed),
      ...(floor.pipelined === undefined
        ? []
        : [line('the same, pipelined with BEGIN and COMMIT', floor.pipelined)]),
    ],
  );
}
