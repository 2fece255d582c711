// pnpm bench: autocannon against a JSON POST handler on Fastify 5, bare, with the floor (the least any
// Idempotency-Key plugin must do), with @node-idempotency/core glued as its README describes, and with the
// plugin; each server in its own process, all measured in one run, in rounds (BENCH_ROUNDS, default 2) that
// alternate the variants; the figures are the mean over the rounds.
import { fileURLToPath } from 'node:url';
import { machine, perSecond, printTable, ratio } from '../../../scripts/bench.js';
import {
  against,
  compareWithBare,
  connections,
  orderBody,
  printPairedCpu,
  roundRows,
  uuidv7,
} from '../../../scripts/http-bench.js';

const seconds = Number(process.env.BENCH_SECONDS ?? 5);
const server = fileURLToPath(new URL('./server.ts', import.meta.url));
const { rps: r, rounds } = await compareWithBare(
  server,
  {
    floor: { variant: 'floor', key: uuidv7, idempotent: true },
    nodeIdempotency: { variant: 'node-idempotency', key: uuidv7, idempotent: true },
    noop: { variant: 'noop-hooks', key: uuidv7 },
  },
  seconds,
);
const { plain, floor, idem } = { plain: r.plain, floor: r.floor as number, idem: r.idem };
const peer = r.nodeIdempotency as number;
console.log(`machine: ${machine()}`);
const n = Object.values(rounds)[0]?.length ?? 0;
printTable(
  `Fastify 5, POST /orders, ${orderBody.length}-byte JSON body, ${connections} connections, unique UUIDv7 keys, mean of ${n} rounds of ${seconds} s`,
  [
    ['no plugin', perSecond(plain)],
    ['floor (UUIDv7 regex, raw body, SHA-256, Map reserve/finalize)', against(floor, { bare: plain })],
    ['@node-idempotency/core@1.0.11 (memory)', against(peer, { bare: plain, floor })],
    ['@idem/adapter-fastify (memory store)', against(idem, { bare: plain, floor })],
    ['@idem / floor', ratio(idem / floor)],
    ['@idem / @node-idempotency/core', ratio(idem / peer)],
    ['@idem/adapter-fastify replays (one key)', perSecond(r.replay)],
    ["three empty async hooks (Fastify's own cost)", against(r.noop as number, { bare: plain })],
  ],
);
printTable(
  `requests per second in each round (rounds 2, 4, … run the variants in reverse order)`,
  roundRows(rounds),
);

// The same comparison as CPU time per request, the floor and idem at once on one core (steadier than the rates).
await printPairedCpu(server, { variant: 'floor', key: uuidv7 }, { variant: 'idem', key: uuidv7 });
