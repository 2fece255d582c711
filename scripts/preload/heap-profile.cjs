// Preloaded into a bench server (`--require`): V8's sampling heap profile from BENCH_PROBE_SKIP_MS after it starts (the
// warm-up left out) until it exits, written to BENCH_PROBE_PROFILE. Objects that collections freed are kept in it, so
// that it shows every allocation, by site (a 128-byte interval: the server runs several times slower meanwhile).
const inspector = require('node:inspector');
const { writeFileSync } = require('node:fs');

const session = new inspector.Session();
session.connect();
let profiling = false;
const sampling = {
  samplingInterval: 128,
  includeObjectsCollectedByMajorGC: true,
  includeObjectsCollectedByMinorGC: true,
};
setTimeout(
  () => {
    session.post('HeapProfiler.enable', () =>
      session.post('HeapProfiler.startSampling', sampling, () => {
        profiling = true;
      }),
    );
  },
  Number(process.env.BENCH_PROBE_SKIP_MS ?? 3500),
).unref();
process.on('exit', () => {
  if (!profiling) return;
  // A session on this thread answers synchronously: the profile is written before the process ends.
  session.post('HeapProfiler.stopSampling', (error, result) => {
    if (error === null)
      writeFileSync(
        process.env.BENCH_PROBE_PROFILE ?? `server-${process.pid}.heapprofile`,
        JSON.stringify(result.profile),
      );
  });
});
