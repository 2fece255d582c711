import { tmpdir } from 'node:os';
import { drive, type Operation, prepare, startCatalog } from './catalog-load.js';
const [operation, which, db, n] = process.argv.slice(2) as [Operation, string, string, string];
for (let i = 0; i < Number(n ?? 1); i++) {
const server = await startCatalog({
  DATABASE_URL: db === 'sqlite' ? `sqlite:${tmpdir()}/idem-rate-${process.pid}-${i}.db` : (process.env.PGURL as string),
  ...(which === 'cached' ? { IDEMPOTENCY_REPLAY_CACHE_ENTRIES: '10000' } : {}),
});
await prepare(server.url);
const retryShare = which === 'replay' || which === 'cached' ? 1 : 0;
await drive(server.url, { operation, keyed: which !== 'plain', seconds: 1, retryShare });
const r = await drive(server.url, { operation, keyed: which !== 'plain', seconds: 4, retryShare });
console.log(which, operation, Math.round(r.requestsPerSecond), 'p50', r.latency.p50);
await server.stop();
}
