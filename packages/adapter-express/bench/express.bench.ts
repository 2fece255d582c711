// pnpm bench: autocannon against a trivial JSON POST handler on Express 5, with and without the middleware,
// each server in its own process, all measured in the same run. Also express-idempotency@1.0.6 side by side.
import { fileURLToPath } from 'node:url';
import { machine, perSecond, printTable, ratio } from '../../../scripts/bench.js';
import { compareWithBare, startServer, uuidv7 } from '../../../scripts/http-bench.js';

const seconds = Number(process.env.BENCH_SECONDS ?? 5);
const server = fileURLToPath(new URL('./server.ts', import.meta.url));
const r = await compareWithBare(
  server,
  {
    peer: { variant: 'express-idempotency', key: uuidv7 },
    // One key for the peer's replays too, its own.
    peerReplay: {
      variant: 'express-idempotency',
      key: (
        (key) => () =>
          key
      )(uuidv7()),
    },
  },
  seconds,
);
const plain = r.plain;
console.log(`machine: ${machine()}`);
printTable('Express 5, POST /orders, 16 connections, unique keys', [
  ['no middleware', perSecond(plain)],
  [
    '@idem/adapter-express (memory store)',
    `${perSecond(r.idem as number)} = ${ratio((r.idem as number) / plain)}`,
  ],
  ['@idem/adapter-express replays (one key)', perSecond(r.replay as number)],
  [
    'express-idempotency@1.0.6 (memory)',
    `${perSecond(r.peer as number)} = ${ratio((r.peer as number) / plain)}`,
  ],
  ['express-idempotency@1.0.6 replays', perSecond(r.peerReplay as number)],
  ['@idem / express-idempotency', ratio((r.idem as number) / (r.peer as number))],
]);

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
          body: '{"item":"book"}',
        }).then((response) => response.arrayBuffer()),
      ),
    );
    return ((await (await fetch(`${url}/count`)).json()) as { orders: number }).orders;
  } finally {
    child.kill();
  }
}
printTable('20 concurrent requests with one key: handler runs', [
  ['@idem/adapter-express', String(await concurrentRuns('idem'))],
  ['express-idempotency@1.0.6', String(await concurrentRuns('express-idempotency'))],
]);
