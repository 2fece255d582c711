// Preloaded into a bench server (`--require`): a CPU profile (100 µs sampling) from BENCH_PROBE_SKIP_MS after it starts
// (the warm-up left out) until it exits, written to BENCH_PROBE_PROFILE. (`--cpu-prof` is not allowed in NODE_OPTIONS,
// and it would profile the start and the warm-up too.)
const inspector = require('node:inspector');
const { writeFileSync } = require('node:fs');

const session = new inspector.Session();
session.connect();
let profiling = false;
setTimeout(
  () => {
    session.post('Profiler.enable', () =>
      session.post('Profiler.setSamplingInterval', { interval: 100 }, () =>
        session.post('Profiler.start', () => {
          profiling = true;
        }),
      ),
    );
  },
  Number(process.env.BENCH_PROBE_SKIP_MS ?? 3500),
).unref();
process.on('exit', () => {
  if (!profiling) return;
  // A session on this thread answers synchronously: the profile is written before the process ends.
  session.post('Profiler.stop', (error, result) => {
    if (error === null)
      writeFileSync(
        process.env.BENCH_PROBE_PROFILE ?? `server-${process.pid}.cpuprofile`,
        JSON.stringify(result.profile),
      );
  });
});
