// Preloaded into a bench server (`--require`): V8's sampling heap profile of the watched window (see window.cjs),
// written to BENCH_PROBE_PROFILE. Objects that collections freed are kept in it, so that it shows every
// allocation, by site (a 128-byte interval: the server runs several times slower meanwhile, and the file, which
// holds every sample, runs to tens of MB).
const inspector = require('node:inspector');
const { writeFileSync } = require('node:fs');
const watchWindow = require('./window.cjs');

const session = new inspector.Session();
session.connect();
const failed = (step, error) => process.stderr.write(`heap-profile: ${step} failed: ${error.message}\n`);
const sampling = {
  samplingInterval: 128,
  includeObjectsCollectedByMajorGC: true,
  includeObjectsCollectedByMinorGC: true,
};
// A session on this thread answers synchronously: the profile is written before the handler returns.
watchWindow(
  () => {
    session.post('HeapProfiler.enable', (error) => error && failed('enable', error));
    session.post('HeapProfiler.startSampling', sampling, (error) => error && failed('start', error));
  },
  () => {
    session.post('HeapProfiler.stopSampling', (error, result) => {
      if (error) failed('stop', error);
      else
        writeFileSync(
          process.env.BENCH_PROBE_PROFILE ?? `server-${process.pid}.heapprofile`,
          JSON.stringify(result.profile),
        );
    });
  },
);
