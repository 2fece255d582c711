// Preloaded into a bench server (`--require`): a CPU profile (100 µs sampling) of the watched window (see
// window.cjs), written to BENCH_PROBE_PROFILE. (`--cpu-prof` is not allowed in NODE_OPTIONS, and it would profile
// the start and the warm-up too.)
const inspector = require('node:inspector');
const { writeFileSync } = require('node:fs');
const watchWindow = require('./window.cjs');

const session = new inspector.Session();
session.connect();
const failed = (step, error) => process.stderr.write(`cpu-profile: ${step} failed: ${error.message}\n`);
// A session on this thread answers synchronously: the profile is written before the handler returns.
watchWindow(
  () => {
    session.post('Profiler.enable', (error) => error && failed('enable', error));
    session.post(
      'Profiler.setSamplingInterval',
      { interval: 100 },
      (error) => error && failed('interval', error),
    );
    session.post('Profiler.start', (error) => error && failed('start', error));
  },
  () => {
    session.post('Profiler.stop', (error, result) => {
      if (error) failed('stop', error);
      else
        writeFileSync(
          process.env.BENCH_PROBE_PROFILE ?? `server-${process.pid}.cpuprofile`,
          JSON.stringify(result.profile),
        );
    });
  },
);
