// pnpm bench: the catalog's throughput with and without Idempotency-Key, side by side in one run, for
// namespace creates and table commits, on SQLite and PostgreSQL, and replays of one key (every request a
// retry of the same create) against creates without a key, also with the per-node replay cache
// (IDEMPOTENCY_REPLAY_CACHE_ENTRIES). The server runs on core 0, autocannon on core 1. Each variant runs once
// per round (BENCH_ROUNDS, default 2), in alternating order (forward, then backward), each in a fresh database
// and server process; the figures are the means over the rounds, so that drift over the run hits every variant
// alike.
import { tmpdir } from 'node:os';
import { machine, perSecond, printTable, ratio } from '../../../scripts/bench.js';
import { freshPostgres } from '../test/support/databases.js';
import { drive, type Operation, prepare, startCatalog } from './catalog-load.js';

const seconds = Number(process.env.BENCH_SECONDS ?? 5);
const rounds = Number(process.env.BENCH_ROUNDS ?? 2);
const databases = (process.env.BENCH_DATABASES ?? 'sqlite,postgres').split(',');

/** A variant: keyed or not, every request a retry of the one before (replays), the replay cache on. */
interface Variant {
  readonly keyed: boolean;
  readonly replays?: true;
  readonly cache?: true;
}

async function measure(database: string, operation: Operation, name: string, variant: Variant) {
  const pg = database === 'postgres' ? await freshPostgres() : undefined;
  const server = await startCatalog({
    DATABASE_URL:
      pg?.url ?? `sqlite:${tmpdir()}/idem-bench-${process.pid}-${name}-${operation}-${Date.now()}.db`,
    ...(variant.cache === true ? { IDEMPOTENCY_REPLAY_CACHE_ENTRIES: '10000' } : {}),
  });
  try {
    await prepare(server.url);
    const load = { operation, keyed: variant.keyed, retryShare: variant.replays === true ? 1 : 0 };
    await drive(server.url, { ...load, seconds: 1 }); // warm-up
    const result = await drive(server.url, { ...load, seconds });
    if (result.errors > 0) throw new Error(`${result.errors} errors in ${name} ${operation}`);
    return result.requestsPerSecond;
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
  for (const operation of ['create', 'commit'] as Operation[]) {
    // Creates also measure replays: every request the retry of one create, with its key, from 16 connections.
    const variants: Record<string, Variant> = {
      plain: { keyed: false },
      keyed: { keyed: true },
      ...(operation === 'create'
        ? {
            replay: { keyed: true, replays: true },
            replayCached: { keyed: true, replays: true, cache: true },
          }
        : {}),
    };
    const names = Object.keys(variants);
    const measured: Record<string, number[]> = Object.fromEntries(names.map((name) => [name, []]));
    for (let round = 0; round < rounds; round++) {
      for (const name of round % 2 === 0 ? names : [...names].reverse()) {
        measured[name]?.push(await measure(database, operation, name, variants[name] as Variant));
      }
    }
    const rate = (name: string) => mean(measured[name] ?? []);
    const plain = rate('plain');
    rows.push([`${operation}: without a key`, perSecond(plain)]);
    rows.push([
      `${operation}: with a key`,
      `${perSecond(rate('keyed'))}  (${ratio(rate('keyed') / plain)} of without)`,
    ]);
    if (measured.replay !== undefined)
      rows.push([
        `${operation}: replays of one key`,
        `${perSecond(rate('replay'))}  (${ratio(rate('replay') / plain)} of creates without a key)`,
      ]);
    if (measured.replayCached !== undefined)
      rows.push([
        `${operation}: replays of one key, replay cache on`,
        `${perSecond(rate('replayCached'))}  (${ratio(rate('replayCached') / plain)} of creates without a key)`,
      ]);
    for (const name of names)
      perRound.push([`${operation} ${name}`, (measured[name] ?? []).map(perSecond).join(', ')]);
  }
  printTable(`reference server on ${database}, mean of ${rounds} rounds of ${seconds} s`, rows);
  printTable(
    `requests per second in each round (rounds 2, 4, … run the variants in reverse order)`,
    perRound,
  );
}
