// pnpm bench: autocannon against a trivial JSON POST handler on Fastify 5, with and without the plugin, each
// server in its own process, measured in the same run.
import { fileURLToPath } from 'node:url';
import { machine, perSecond, printTable, ratio } from '../../../scripts/bench.js';
import { compareWithBare, uuidv7 } from '../../../scripts/http-bench.js';

const seconds = Number(process.env.BENCH_SECONDS ?? 5);
const server = fileURLToPath(new URL('./server.ts', import.meta.url));
const r = await compareWithBare(server, { noop: { variant: 'noop-hooks', key: uuidv7 } }, seconds);
const plain = r.plain;
console.log(`machine: ${machine()}`);
printTable('Fastify 5, POST /orders, 16 connections, unique keys', [
  ['no plugin', perSecond(plain)],
  [
    '@idem/adapter-fastify (memory store)',
    `${perSecond(r.idem as number)} = ${ratio((r.idem as number) / plain)}`,
  ],
  ['@idem/adapter-fastify replays (one key)', perSecond(r.replay as number)],
  [
    "three empty async hooks (Fastify's own cost)",
    `${perSecond(r.noop as number)} = ${ratio((r.noop as number) / plain)}`,
  ],
]);
