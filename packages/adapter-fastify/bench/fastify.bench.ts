// pnpm bench: autocannon against a JSON POST handler on Fastify 5, with and without the plugin; each server in its own process, all measured in one run, in rounds (BENCH_ROUNDS, default 2) that
// alternate the variants; the figures are the mean over the rounds.
import { fileURLToPath } from 'node:url';
import { machine, perSecond, printTable } from '../../../scripts/bench.js';
import {
  against,
  compareWithBare,
  connections,
  orderBody,
  roundRows,
  uuidv7,
} from '../../../scripts/http-bench.js';

const seconds = Number(process.env.BENCH_SECONDS ?? 5);
const server = fileURLToPath(new URL('./server.ts', import.meta.url));
const { rps: r, rounds } = await compareWithBare(
  server,
  {
    noop: { variant: 'noop-hooks', key: uuidv7 },
  },
  seconds,
);
const { plain, idem } = r;
console.log(`machine: ${machine()}`);
const n = Object.values(rounds)[0]?.length ?? 0;
printTable(
  `Fastify 5, POST /orders, ${orderBody.length}-byte JSON body, ${connections} connections, unique UUIDv7 keys, mean of ${n} rounds of ${seconds} s`,
  [
    ['no plugin', perSecond(plain)],
    ['@idem/adapter-fastify (memory store)', against(idem, { bare: plain })],
    ['@idem/adapter-fastify replays (one key)', perSecond(r.replay)],
    ["three empty async hooks (Fastify's own cost)", against(r.noop as number, { bare: plain })],
  ],
);
printTable(
  `requests per second in each round (rounds 2, 4, … run the variants in reverse order)`,
  roundRows(rounds),
);
