// pnpm bench: autocannon against a JSON POST handler on Hono 4 (@hono/node-server), bare, with an empty
// middleware, with the floor (the least any Idempotency-Key middleware must do), and with the middleware; each
// server in its own process, all measured in one run, in rounds (BENCH_ROUNDS, default 2) that alternate the
// variants; the figures are the mean over the rounds.
import { fileURLToPath } from 'node:url';
import { machine, perSecond, printTable, ratio } from '../../../scripts/bench.js';
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
    noop: { variant: 'noop', key: uuidv7 },
    floor: { variant: 'floor', key: uuidv7, idempotent: true },
  },
  seconds,
);
const { plain, idem } = r;
const floor = r.floor as number;
console.log(`machine: ${machine()}`);
const n = Object.values(rounds)[0]?.length ?? 0;
printTable(
  `Hono 4 on @hono/node-server, POST /orders, ${orderBody.length}-byte JSON body, ${connections} connections, unique UUIDv7 keys, mean of ${n} rounds of ${seconds} s`,
  [
    ['no middleware', perSecond(plain)],
    ['an empty middleware (Hono’s own cost)', against(r.noop as number, { bare: plain })],
    ['floor (UUIDv7 regex, raw body, SHA-256, Map reserve/finalize)', against(floor, { bare: plain })],
    ['@idem/adapter-hono (memory store)', against(idem, { bare: plain, floor })],
    ['@idem / floor', ratio(idem / floor)],
    ['@idem/adapter-hono replays (one key)', perSecond(r.replay)],
  ],
);
printTable(
  `requests per second in each round (rounds 2, 4, … run the variants in reverse order)`,
  roundRows(rounds),
);
