// pnpm bench: autocannon against a JSON POST handler on NestJS 12 (platform-express and platform-fastify), bare,
// with the floor (the least any Idempotency-Key interceptor must do) and with the module; each server in its own
// process, all measured in one run, in rounds (BENCH_ROUNDS, default 2) that alternate the variants; the figures
// are the mean over the rounds.
import { fileURLToPath } from 'node:url';
import { machine, perSecond, printTable, ratio } from '../../../scripts/bench.js';
import {
  against,
  connections,
  measureServers,
  orderBody,
  printPairedCpu,
  replayRun,
  roundRows,
  uuidv7,
} from '../../../scripts/http-bench.js';

const seconds = Number(process.env.BENCH_SECONDS ?? 5);
const rounds = Number(process.env.BENCH_ROUNDS ?? 2);
const server = fileURLToPath(new URL('./server.ts', import.meta.url));
const perRound = await measureServers(
  server,
  {
    plain: { variant: 'plain', key: uuidv7 },
    floor: { variant: 'floor', key: uuidv7, idempotent: true },
    idem: { variant: 'idem', key: uuidv7, idempotent: true },
    replay: replayRun('idem'),
    plainFastify: { variant: 'plain-fastify', key: uuidv7 },
    floorFastify: { variant: 'floor-fastify', key: uuidv7, idempotent: true },
    idemFastify: { variant: 'idem-fastify', key: uuidv7, idempotent: true },
  },
  seconds,
  rounds,
);
const mean = (name: string) => {
  const values = perRound[name] ?? [];
  return values.reduce((sum, value) => sum + value, 0) / values.length;
};
console.log(`machine: ${machine()}`);
for (const [label, suffix] of [
  ['platform-express', ''],
  ['platform-fastify', 'Fastify'],
] as const) {
  const [plain, floor, idem] = [mean(`plain${suffix}`), mean(`floor${suffix}`), mean(`idem${suffix}`)];
  printTable(
    `NestJS 12 on ${label}, POST /orders, ${orderBody.length}-byte JSON body, ${connections} connections, unique UUIDv7 keys, mean of ${rounds} rounds of ${seconds} s`,
    [
      ['no module', perSecond(plain)],
      ['floor (UUIDv7 regex, raw body, SHA-256, Map reserve/finalize)', against(floor, { bare: plain })],
      ['@idem/adapter-nestjs (memory store)', against(idem, { bare: plain, floor })],
      ['@idem / floor', ratio(idem / floor)],
      ...(suffix === ''
        ? ([['@idem/adapter-nestjs replays (one key)', perSecond(mean('replay'))]] as [string, string][])
        : []),
    ],
  );
}
printTable(
  'requests per second in each round (rounds 2, 4, … run the variants in reverse order)',
  roundRows(perRound),
);
for (const [label, suffix] of [
  ['platform-express', ''],
  ['platform-fastify', '-fastify'],
] as const) {
  const floor = { variant: `floor${suffix}`, key: uuidv7 };
  await printPairedCpu(server, floor, { variant: `idem${suffix}`, key: uuidv7 }, ` on ${label}`);
}
