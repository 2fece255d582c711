// One variant of a bench server under the bench's load, with a preload that watches it: what a profile or a
// GC trace of the measured window needs, without the start and the warm-up (the server's first seconds).
//
//   tsx scripts/probe.ts <server.ts> <variant> <gc|cpu|heap> [seconds]
//
//   gc   prints the server's scavenges and mark-compacts, and the old generation's growth, on stderr
//   cpu  writes a CPU profile of the load to BENCH_PROBE_PROFILE (default ./server-<pid>.cpuprofile)
//   heap writes a sampling heap profile of the load, every allocation by site, to BENCH_PROBE_PROFILE
//
// Run it from the package whose server it is, with the tsconfig its bench uses, e.g. from adapter-fastify:
//   TSX_TSCONFIG_PATH=../../tsconfig.build.json tsx ../../scripts/probe.ts bench/server.ts idem gc
// The load is 3 s of warm-up, then `seconds` (default 8) measured; the preload starts watching after 3.5 s.
import { fileURLToPath } from 'node:url';
import { load, startServer, uuidv7 } from './http-bench.js';

const [script, variant, watch, seconds = '8'] = process.argv.slice(2);
const preloads: Record<string, string> = {
  gc: 'gc-stats.cjs',
  cpu: 'cpu-profile.cjs',
  heap: 'heap-profile.cjs',
};
const preload = watch === undefined ? undefined : preloads[watch];
if (script === undefined || variant === undefined || preload === undefined || !(Number(seconds) > 0)) {
  console.error('usage: tsx scripts/probe.ts <server.ts> <variant> <gc|cpu|heap> [seconds]');
  process.exit(2);
}
const preloadPath = fileURLToPath(new URL(`./preload/${preload}`, import.meta.url));
const { url, child } = await startServer(script, variant, { NODE_OPTIONS: `--require ${preloadPath}` });
await load(url, uuidv7, 3);
const answered = await load(url, uuidv7, Number(seconds), true);
console.log(
  `${variant}: ${answered} requests in ${seconds} s (${Math.round(answered / Number(seconds))} /s)`,
);
const exited = new Promise((resolve) => child.once('exit', resolve));
child.kill('SIGTERM');
await exited;
