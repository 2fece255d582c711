// Preloaded into a bench server (`--require`): counts the server's garbage collections from BENCH_PROBE_SKIP_MS after
// it starts (the warm-up left out) until it exits, and prints them on stderr, with the old generation's growth.
const { PerformanceObserver, constants } = require('node:perf_hooks');
const v8 = require('node:v8');

const oldSpace = () =>
  v8.getHeapSpaceStatistics().find((space) => space.space_name === 'old_space').space_used_size;
const seen = { scavenges: 0, scavengeMs: 0, markCompacts: 0, markCompactMs: 0 };
let startedAt;
let oldAtStart;
setTimeout(
  () => {
    startedAt = performance.now();
    oldAtStart = oldSpace();
  },
  Number(process.env.BENCH_PROBE_SKIP_MS ?? 3500),
).unref();
new PerformanceObserver((list) => {
  if (startedAt === undefined) return;
  for (const entry of list.getEntries()) {
    if (entry.detail.kind === constants.NODE_PERFORMANCE_GC_MINOR) {
      seen.scavenges++;
      seen.scavengeMs += entry.duration;
    } else if (entry.detail.kind === constants.NODE_PERFORMANCE_GC_MAJOR) {
      seen.markCompacts++;
      seen.markCompactMs += entry.duration;
    }
  }
}).observe({ entryTypes: ['gc'] });
process.on('exit', () => {
  if (startedAt === undefined) return;
  const seconds = (performance.now() - startedAt) / 1000;
  const mb = (bytes) => (bytes / 1e6).toFixed(1);
  process.stderr.write(
    `gc over ${seconds.toFixed(1)} s: ${seen.scavenges} scavenges, ${seen.scavengeMs.toFixed(0)} ms ` +
      `(${(seen.scavengeMs / seen.scavenges).toFixed(2)} ms each); ${seen.markCompacts} mark-compacts, ` +
      `${seen.markCompactMs.toFixed(0)} ms; old space ${mb(oldAtStart)} -> ${mb(oldSpace())} MB\n`,
  );
});
