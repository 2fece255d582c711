// One variant of a bench server under the bench's load, with a preload that watches the measured load only (not
// the start or the warm-up): what a profile or a GC count of a request needs.
//
//   tsx scripts/probe.ts <server.ts> <variant> <gc|cpu|heap> [seconds]
//
//   gc   prints the server's scavenges and mark-compacts, and the old generation's growth, on stderr
//   cpu  writes a CPU profile of the load to BENCH_PROBE_PROFILE (default ./server-<pid>.cpuprofile)
//   heap writes a sampling heap profile of the load, every allocation by site, to BENCH_PROBE_PROFILE
//
// Run it from the package whose server it is, with the tsconfig its bench uses, e.g. from adapter-fastify:
//   TSX_TSCONFIG_PATH=../../tsconfig.build.json tsx ../../scripts/probe.ts bench/server.ts idem gc
// The load is 3 s of warm-up, then `seconds` (default 8) measured, between two SIGUSR2 that open and close the
// preload's window (scripts/preload/window.cjs); the requests it prints are those of the window.
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { load, startServer, uuidv7 } from './http-bench.js';

const [script, variant, watch, seconds = '8'] = process.argv.slice(2);
const preloads: Record<string, string> = {
  gc: 'gc-stats.cjs',
  cpu: 'cpu-profile.cjs',
  heap: 'heap-profile.cjs',
};
const preload = watch !== undefined && Object.hasOwn(preloads, watch) ? preloads[watch] : undefined;
if (script === undefined || variant === undefined || preload === undefined || !(Number(seconds) > 0)) {
  console.error('usage: tsx scripts/probe.ts <server.ts> <variant> <gc|cpu|heap> [seconds]');
  process.exit(2);
}
const preloadPath = fileURLToPath(new URL(`./preload/${preload}`, import.meta.url));
// The user's own node options kept, the preload added (quoted: a path may hold spaces).
// biome-ignore lint/suspicious/noUndeclaredEnvVars: a script run by hand, never a turbo task
const nodeOptions = `${process.env.NODE_OPTIONS ?? ''} --require ${JSON.stringify(preloadPath)}`.trim();
const { url, child } = await startServer(script, variant, { NODE_OPTIONS: nodeOptions });
const exited = new Promise((resolve) => child.once('exit', resolve));
try {
  await load(url, uuidv7, 3);
  child.kill('SIGUSR2'); // the window opens
  await sleep(50);
  const answered = await load(url, uuidv7, Number(seconds), true);
  child.kill('SIGUSR2'); // and closes: the preload writes what it saw
  await sleep(500);
  console.log(
    `${variant}: ${answered} requests in ${seconds} s (${Math.round(answered / Number(seconds))} /s)`,
  );
} finally {
  child.kill('SIGTERM');
  await exited;
}
