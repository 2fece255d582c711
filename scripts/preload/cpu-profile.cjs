// Preloaded into a bench server (`--require`): a CPU profile (100 µs sampling) of the watched window (see
// window.cjs), written to BENCH_PROBE_PROFILE. (`--cpu-prof` is not allowed in NODE_OPTIONS, and it would profile
// the start and the warm-up too.)
require('./inspector-profile.cjs')(
  'cpu-profile',
  'cpuprofile',
  [['Profiler.enable'], ['Profiler.setSamplingInterval', { interval: 100 }], ['Profiler.start']],
  'Profiler.stop',
);
