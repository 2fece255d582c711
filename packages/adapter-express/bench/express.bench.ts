// pnpm bench: autocannon against a JSON POST handler on Express 5, bare, with the floor (the least any
// Idempotency-Key middleware must do), with @node-idempotency/core glued as its README describes, with
// express-idempotency@1.0.6 on the same app, and with the middleware; each server in its own process, all
// measured in one run, in rounds (BENCH_ROUNDS, default 2) that alternate the variants; the figures are the
// mean over the rounds.
import { fileURLToPath } from 'node:url';
import { machine, perSecond, printTable, ratio } from '../../../scripts/bench.js';
import {
  against,
  compareWithBare,
  connections,
  handlerRuns,
  orderBody,
  printPairedCpu,
  replayRun,
  roundRows,
  startServer,
  uuidv7,
} from '../../../scripts/http-bench.js';

const seconds = Number(process.env.BENCH_SECONDS ?? 5);
const server = fileURLToPath(new URL('./server.ts', import.meta.url));
const { rps: r, rounds } = await compareWithBare(
  server,
  {
    floor: { variant: 'floor', key: uuidv7, idempotent: true },
    nodeIdempotency: { variant: 'node-idempotency', key: uuidv7, idempotent: true },
    expressIdempotency: { variant: 'express-idempotency', key: uuidv7, idempotent: true },
    // One key for the peer's replays too, its own.
    expressIdempotencyReplay: replayRun('express-idempotency'),
  },
  seconds,
);
const { plain, floor, idem } = { plain: r.plain, floor: r.floor as number, idem: r.idem };
const nodeIdempotency = r.nodeIdempotency as number;
const expressIdem = r.expressIdempotency as number;
console.log(`machine: ${machine()}`);
const n = Object.values(rounds)[0]?.length ?? 0;
printTable(
  `Express 5, POST /orders, ${orderBody.length}-byte JSON body, ${connections} connections, unique UUIDv7 keys, mean of ${n} rounds of ${seconds} s`,
  [
    ['no middleware', perSecond(plain)],
    ['floor (UUIDv7 regex, raw body, SHA-256, Map reserve/finalize)', against(floor, { bare: plain })],
    ['@node-idempotency/core@1.0.11 (memory)', against(nodeIdempotency, { bare: plain, floor })],
    ['express-idempotency@1.0.6 (memory)', against(expressIdem, { bare: plain, floor })],
    ['@idem/adapter-express (memory store)', against(idem, { bare: plain, floor })],
    ['@idem / floor', ratio(idem / floor)],
    ['@idem / @node-idempotency/core', ratio(idem / nodeIdempotency)],
    ['@idem / express-idempotency', ratio(idem / expressIdem)],
    ['@idem/adapter-express replays (one key)', perSecond(r.replay)],
    ['express-idempotency@1.0.6 replays', perSecond(r.expressIdempotencyReplay as number)],
  ],
);
printTable(
  `requests per second in each round (rounds 2, 4, … run the variants in reverse order)`,
  roundRows(rounds),
);

// Behaviour side by side: 20 concurrent requests with one key, how often does the handler run?
async function concurrentRuns(variant: string): Promise<number> {
  const { url, child } = await startServer(server, variant);
  try {
    const key = uuidv7();
    await Promise.all(
      Array.from({ length: 20 }, () =>
        fetch(`${url}/orders`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'idempotency-key': key },
          body: orderBody,
        }).then((response) => response.arrayBuffer()),
      ),
    );
    return await handlerRuns(url);
  } finally {
    child.kill();
  }
}
printTable('20 concurrent requests with one key: handler runs', [
  ['floor', String(await concurrentRuns('floor'))],
  ['@node-idempotency/core@1.0.11', String(await concurrentRuns('node-idempotency'))],
  ['express-idempotency@1.0.6', String(await concurrentRuns('express-idempotency'))],
  ['@idem/adapter-express', String(await concurrentRuns('idem'))],
]);

// The same comparison as CPU time per request, the floor and idem at once on one core (steadier than the rates).
await printPairedCpu(server, { variant: 'floor', key: uuidv7 }, { variant: 'idem', key: uuidv7 });
