// Two variants of one bench server, CPU time per request loaded in turns (`turnsCpuRatio`): what a piece of a
// server costs, measured by taking it out behind a switch the server script reads from its environment.
//
//   tsx scripts/ab.ts <server.ts> <A> <B> [pairs] [processes]      A and B: [other-server.ts:]variant[,NAME=value…]
//
// A variant may name its own server script before a colon: the same server in another checkout, to measure a
// change against the build before it (`/work/before/packages/adapter-fastify/bench/server.ts:idem`).
//
// Run it from the package whose server it is, with the tsconfig its bench uses, e.g. from adapter-fastify:
//   TSX_TSCONFIG_PATH=../../tsconfig.build.json tsx ../../scripts/ab.ts bench/server.ts idem idem,FP=const 8
// Prints A's CPU per request over B's for each pair (above 1: B is cheaper) and the medians. One process can sit
// 10–15 % off another of the same code, and every pair of one run shares its two processes' luck: `processes`
// (default 4) spreads the pairs over that many fresh pairs of servers, one after another.
import { type ServerRun, turnsCpuRatio, uuidv7 } from './http-bench.js';

/** `[other/server.ts:]idem,FP=const,X=1` → the variant, its server script and its environment. */
function runOf(spec: string): ServerRun {
  const [head, ...settings] = spec.split(',');
  const colon = (head as string).lastIndexOf(':');
  const script = colon === -1 ? undefined : (head as string).slice(0, colon);
  const variant = colon === -1 ? head : (head as string).slice(colon + 1);
  const env = Object.fromEntries(
    settings.map((setting) => {
      const at = setting.indexOf('=');
      if (at < 1) throw new Error(`"${setting}" is not NAME=value`);
      return [setting.slice(0, at), setting.slice(at + 1)];
    }),
  );
  return { variant: variant as string, key: uuidv7, env, ...(script === undefined ? {} : { script }) };
}

const [script, a, b, pairs = '8', processes = '4'] = process.argv.slice(2);
if (
  script === undefined ||
  a === undefined ||
  b === undefined ||
  !(Number.isSafeInteger(Number(pairs)) && Number(pairs) > 0) ||
  !(Number.isSafeInteger(Number(processes)) && Number(processes) > 0)
) {
  console.error(
    'usage: tsx scripts/ab.ts <server.ts> <[server.ts:]variant[,NAME=value…]> <[server.ts:]variant[,NAME=value…]> [pairs] [processes]',
  );
  process.exit(2);
}
const result = await turnsCpuRatio(script, runOf(a), runOf(b), {
  windows: Number(pairs),
  processes: Number(processes),
});
if (result === undefined) {
  console.error('no /proc here: CPU time per process cannot be read');
  process.exit(1);
}
// turnsCpuRatio gives B's cost over A's per window; printed as A over B, the way the benches print floor ÷ idem.
const [costA, costB] = result.microseconds;
console.log(`${a}: ${costA.toFixed(1)} µs per request, ${b}: ${costB.toFixed(1)} µs (medians)`);
console.log(
  `${a} ÷ ${b}: ${(1 / result.median).toFixed(3)} (pairs ${result.windows.map((w) => (1 / w).toFixed(2)).join(', ')})`,
);
