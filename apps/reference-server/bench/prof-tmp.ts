import { tmpdir } from 'node:os';
import { drive, type Operation, prepare, startCatalog } from './catalog-load.js';
const [operation, which, db] = process.argv.slice(2) as [Operation, string, string];
const keyed = which !== 'plain';
const dir = `/tmp/prof/${db}-${operation}-${which}`;
process.env.BENCH_NODE_ARGS = `--cpu-prof --cpu-prof-dir=${dir}`;
const server = await startCatalog({
  DATABASE_URL: db === 'sqlite' ? `sqlite:${tmpdir()}/idem-prof-${process.pid}.db` : (process.env.PGURL as string),
  ...(which === 'cached' ? { IDEMPOTENCY_REPLAY_CACHE_ENTRIES: '10000' } : {}),
});
await prepare(server.url);
const retryShare = which === 'replay' || which === 'cached' ? 1 : 0;
await drive(server.url, { operation, keyed, seconds: 1, retryShare });
const r = await drive(server.url, { operation, keyed, seconds: 5, retryShare });
console.log(which, operation, r.requestsPerSecond, 'errors', r.errors, 'total', Math.round(r.requestsPerSecond * 6));
await server.stop();
