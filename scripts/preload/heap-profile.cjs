// Preloaded into a bench server (`--require`): V8's sampling heap profile of the watched window (see window.cjs),
// written to BENCH_PROBE_PROFILE. Objects that collections freed are kept in it, so that it shows every
// allocation, by site (a 128-byte interval: the server runs several times slower meanwhile, and the file, which
// holds every sample, runs to tens of MB).
require('./inspector-profile.cjs')(
  'heap-profile',
  'heapprofile',
  [
    ['HeapProfiler.enable'],
    [
      'HeapProfiler.startSampling',
      {
        samplingInterval: 128,
        includeObjectsCollectedByMajorGC: true,
        includeObjectsCollectedByMinorGC: true,
      },
    ],
  ],
  'HeapProfiler.stopSampling',
);
