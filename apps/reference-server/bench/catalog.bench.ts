// pnpm bench: the catalog's throughput with and without Idempotency-Key, side by side in one run, for
// namespace creates and table commits, on SQLite and PostgreSQL, and replays of one key (every request a
// retry of the same create) against creates without a key, also with the per-node replay cache
// (IDEMPOTENCY_REPLAY_CACHE_ENTRIES). The server runs on core 0, autocannon on core 1.
import { machine, perSecond, printTable, ratio } from '../../../scripts/bench.js';
import { freshPostgres } from '../test/support/databases.js';
import { drive, type Operation, prepare, startCatalog } from './catalog-load.js';

const seconds = Number(process.env.BENCH_SECONDS ?? 5);
const databases = (process.env.BENCH_DATABASES ?? 'sqlite,postgres').split(',');

console.log(`machine: ${machine()}`);
for (const database of databases) {
  const rows: [string, string][] = [];
  for (const operation of ['create', 'commit'] as Operation[]) {
    const measured: Record<string, number> = {};
    // Unkeyed first and last (averaged, so that drift hits both sides), keyed between; a fresh database and
    // server process for each run.
    // Creates also measure replays: every request the retry of one create, with its key, from 16 connections.
    const runs = [
      ['plain', false],
      ['keyed', true],
      ...(operation === 'create'
        ? ([
            ['replay', true],
            ['replayCached', true],
          ] as const)
        : []),
      ['plainAgain', false],
    ] as const;
    for (const [name, keyed] of runs) {
      const pg = database === 'postgres' ? await freshPostgres() : undefined;
      const server = await startCatalog({
        DATABASE_URL:
          pg?.url ??
          `sqlite:${(await import('node:os')).tmpdir()}/idem-bench-${process.pid}-${name}-${operation}.db`,
        ...(name === 'replayCached' ? { IDEMPOTENCY_REPLAY_CACHE_ENTRIES: '10000' } : {}),
      });
      try {
        await prepare(server.url);
        const retryShare = name.startsWith('replay') ? 1 : 0;
        await drive(server.url, { operation, keyed, seconds: 1, retryShare }); // warm-up
        const result = await drive(server.url, { operation, keyed, seconds, retryShare });
        if (result.errors > 0) throw new Error(`${result.errors} errors in ${name} ${operation}`);
        measured[name] = result.requestsPerSecond;
      } finally {
        await server.stop();
        await pg?.drop();
      }
    }
    const plain = ((measured.plain as number) + (measured.plainAgain as number)) / 2;
    const keyed = measured.keyed as number;
    rows.push([`${operation}: without a key`, perSecond(plain)]);
    rows.push([`${operation}: with a key`, `${perSecond(keyed)}  (${ratio(keyed / plain)} of without)`]);
    if (measured.replay !== undefined)
      rows.push([
        `${operation}: replays of one key`,
        `${perSecond(measured.replay)}  (${ratio(measured.replay / plain)} of creates without a key)`,
      ]);
    if (measured.replayCached !== undefined)
      rows.push([
        `${operation}: replays of one key, replay cache on`,
        `${perSecond(measured.replayCached)}  (${ratio(measured.replayCached / plain)} of creates without a key)`,
      ]);
  }
  printTable(`reference server on ${database}`, rows);
}
