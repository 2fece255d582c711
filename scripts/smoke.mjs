// Consumer smoke test: pack every publishable package, install the tarballs into a throwaway project with
// plain npm, and use them from both ESM and CommonJS, as a user would after `npm install`. Then every code
// block of the READMEs is typechecked there (strict, nodenext, under several TypeScript versions) and the
// quick starts run: see readme-snippets.mjs.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { checkReadmeSnippets, snippetDependencies } from './readme-snippets.mjs';

const root = new URL('..', import.meta.url).pathname;
const work = mkdtempSync(join(tmpdir(), 'idem-smoke-'));
const run = (cmd, args, cwd) =>
  execFileSync(cmd, args, { cwd, stdio: ['ignore', 'pipe', 'inherit'] }).toString();

try {
  const tarballs = [];
  for (const dir of readdirSync(join(root, 'packages'))) {
    const manifest = JSON.parse(readFileSync(join(root, 'packages', dir, 'package.json'), 'utf8'));
    if (manifest.private) continue;
    run('pnpm', ['pack', '--pack-destination', work], join(root, 'packages', dir));
    tarballs.push(manifest.name);
  }
  const files = readdirSync(work).filter((f) => f.endsWith('.tgz'));
  // npm's default project (no "type": CommonJS), with the tarballs, TypeScript and what the README blocks import.
  writeFileSync(join(work, 'package.json'), JSON.stringify({ name: 'smoke', private: true }));
  const install = [...files.map((f) => `./${f}`), ...snippetDependencies(root)];
  run('npm', ['install', '--no-audit', '--no-fund', ...install], work);

  const esm = `
import { createIdempotency, isIdemError } from '@idem/core';
import { createMemoryStore, withReplayCache } from '@idem/store-memory';
import { storeConformance } from '@idem/store-conformance';
import { createRedisStore } from '@idem/store-redis';
import { createSqlStore, ensureSchema } from '@idem/store-sql';
import { idempotencyMiddleware } from '@idem/adapter-express';
import { fastifyIdempotency } from '@idem/adapter-fastify';
import { createIdempotencyMetrics } from '@idem/prometheus';
import { createIdempotencyTracing } from '@idem/opentelemetry';
import { Registry } from 'prom-client';
import { callOutcome, createIdempotentFetch } from '@idem/client';
import { withIdempotency } from '@idem/web';
import { idempotency as honoIdempotency } from '@idem/adapter-hono';
import { IdempotencyModule } from '@idem/adapter-nestjs';
import { Hono } from 'hono';
import { v7 } from 'uuid'; // installed with @idem/client, its one dependency
if (typeof createSqlStore !== 'function' || typeof ensureSchema !== 'function') throw new Error('store-sql');
if (typeof idempotencyMiddleware({ store: createMemoryStore() }) !== 'function') throw new Error('express');
if (typeof fastifyIdempotency !== 'function') throw new Error('fastify');
try {
  createRedisStore({});
  throw new Error('store-redis accepted an unknown client');
} catch (error) {
  if (!(error instanceof TypeError)) throw error;
}
const store = createMemoryStore();
const registry = new Registry();
const metrics = createIdempotencyMetrics({ registry });
const idem = createIdempotency({ store: withReplayCache(store), onEvent: [metrics.onEvent, createIdempotencyTracing().onEvent] });
const key = v7();
const first = await idem.begin({ method: 'POST', route: '/x', body: { a: 1 }, key });
if (first.action !== 'execute') throw new Error('expected execute');
await first.execution.finish({ status: 201, headers: { location: '/x/1' }, body: 'ok' });
const again = await idem.begin({ method: 'POST', route: '/x', body: { a: 1 }, key });
if (again.action !== 'replay' || again.response.headers.location !== '/x/1') throw new Error('expected replay');
if (typeof storeConformance !== 'function' || isIdemError(new Error())) throw new Error('exports');
if (!(await registry.metrics()).includes('idempotency_replays_total{operation="/x"} 1')) throw new Error('prometheus');
await store.close();
// The client half: a key on the first attempt, the same one on the retry.
const keys = [];
const idempotentFetch = createIdempotentFetch({
  baseDelayMs: 0,
  fetch: async (_input, init) => {
    keys.push(new Headers(init.headers).get('idempotency-key'));
    return new Response(null, { status: keys.length === 1 ? 503 : 201 });
  },
});
const answer = await idempotentFetch('http://127.0.0.1:9/orders', { method: 'POST', body: '{}' });
if (answer.status !== 201 || keys[0] !== keys[1] || callOutcome(answer).attempts !== 2) throw new Error('client');
// The Web-standard half: a fetch handler, and a Hono app, each called twice with one key.
let webRuns = 0;
const webHandler = withIdempotency(() => Response.json({ run: ++webRuns }, { status: 201 }), { store: createMemoryStore() });
const webKey = v7();
const webRequest = () => new Request('http://x/orders', { method: 'POST', headers: { 'idempotency-key': webKey, 'content-type': 'application/json' }, body: '{}' });
await (await webHandler(webRequest())).text();
const webRetry = await webHandler(webRequest());
if (webRetry.headers.get('idempotent-replayed') !== 'true' || webRuns !== 1) throw new Error('web');
const hono = new Hono();
hono.use(honoIdempotency({ store: createMemoryStore() }));
hono.post('/orders', (c) => c.json({ run: ++webRuns }, 201));
const honoCall = () => hono.request('/orders', { method: 'POST', headers: { 'idempotency-key': webKey, 'content-type': 'application/json' }, body: '{}' });
await (await honoCall()).text();
if ((await honoCall()).headers.get('idempotent-replayed') !== 'true' || webRuns !== 2) throw new Error('hono');
if (IdempotencyModule.forRoot({ store: createMemoryStore() }).global !== true) throw new Error('nestjs');
console.log('esm ok');
`;
  const cjs = `
const { createIdempotency, validateUuidV7 } = require('@idem/core');
const { createMemoryStore, withReplayCache } = require('@idem/store-memory');
const { createRedisStore, recordKey } = require('@idem/store-redis');
const { conformanceGroups } = require('@idem/store-conformance');
const { schemaStatements } = require('@idem/store-sql');
const { idempotencyMiddleware } = require('@idem/adapter-express');
const { fastifyIdempotency } = require('@idem/adapter-fastify');
const { createIdempotencyMetrics } = require('@idem/prometheus');
const { SpanName } = require('@idem/opentelemetry');
const { Registry } = require('prom-client');
if (typeof createIdempotencyMetrics({ registry: new Registry() }).onEvent !== 'function') throw new Error('prometheus');
if (SpanName.Process !== 'idempotency.process') throw new Error('opentelemetry');
const { createIdempotentFetch, isReplay } = require('@idem/client');
const { v7 } = require('uuid');
if (!schemaStatements('postgres')[0].startsWith('CREATE TABLE IF NOT EXISTS')) throw new Error('store-sql');
if (typeof idempotencyMiddleware !== 'function' || typeof fastifyIdempotency !== 'function') throw new Error('adapters');
if (typeof require('@idem/web').withIdempotency !== 'function') throw new Error('web');
if (typeof require('@idem/adapter-nestjs').IdempotencyModule.forRoot !== 'function') throw new Error('nestjs');
if (typeof require('@idem/adapter-hono').idempotency({ store: createMemoryStore() }).with !== 'function') throw new Error('hono');
if (!validateUuidV7(v7()).ok) throw new Error('uuid');
if (typeof createIdempotentFetch() !== 'function' || isReplay(new Response(null))) throw new Error('client');
if (typeof createRedisStore !== 'function' || recordKey('p:', 'a{b}', 'k') !== 'p:{a%7Bb%7D:k}') throw new Error('store-redis');
if (typeof withReplayCache !== 'function') throw new Error('replay cache');
if (Object.keys(conformanceGroups).length < 6) throw new Error('groups');
createIdempotency({ store: createMemoryStore({ sweepIntervalMs: false }) });
// The Fastify plugin from CommonJS, without \`.default\`: one keyed request twice, the second a replay.
(async () => {
  const app = require('fastify')();
  const store = createMemoryStore({ sweepIntervalMs: false });
  await app.register(fastifyIdempotency, { store });
  let runs = 0;
  app.post('/orders', async () => ({ id: ++runs }));
  const key = v7();
  const send = () =>
    app.inject({ method: 'POST', url: '/orders', headers: { 'idempotency-key': key }, payload: { a: 1 } });
  const first = await send();
  const again = await send();
  if (first.statusCode !== 200 || again.headers['idempotent-replayed'] !== 'true' || runs !== 1) {
    throw new Error(\`fastify from CJS: \${first.statusCode} \${JSON.stringify(again.headers)} runs=\${runs}\`);
  }
  await app.close();
  await store.close();
  console.log('cjs ok');
})().catch((error) => {
  console.error(error);
  process.exit(1);
});
`;
  writeFileSync(join(work, 'smoke.mjs'), esm);
  writeFileSync(join(work, 'smoke.cjs'), cjs);
  process.stdout.write(run('node', ['smoke.mjs'], work));
  process.stdout.write(run('node', ['smoke.cjs'], work));
  // The `idem` binary as npm linked it: migrate a new SQLite file, then count its (no) records as JSON.
  const idemBin = join(work, 'node_modules', '.bin', 'idem');
  const database = `sqlite:${join(work, 'records.db')}`;
  if (!run(idemBin, ['migrate', database], work).includes('created the table idem_records'))
    throw new Error('idem migrate');
  const counted = JSON.parse(run(idemBin, ['stats', database, '--json'], work));
  if (counted.inFlight !== 0 || counted.completed !== 0)
    throw new Error(`idem stats: ${JSON.stringify(counted)}`);
  console.log(
    `idem ${run(idemBin, ['--version'], work).trim()}: migrate and stats run from the installed package`,
  );
  console.log(`smoke: ${tarballs.join(', ')} install and load from ESM and CJS`);
  await checkReadmeSnippets({ root, work });
} finally {
  rmSync(work, { recursive: true, force: true });
}
