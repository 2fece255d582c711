// Preloaded into a bench server (`--require`): counts its garbage collections in the watched window (see
// window.cjs) and prints them on stderr, with the old generation's growth.
const { PerformanceObserver, constants } = require('node:perf_hooks');
const v8 = require('node:v8');
const watchWindow = require('./window.cjs');

const oldSpace = () =>
  v8.getHeapSpaceStatistics().find((space) => space.space_name === 'old_space').space_used_size;
const seen = { scavenges: 0, scavengeMs: 0, markCompacts: 0, markCompactMs: 0 };
let startedAt;
let oldAtStart;
const count = (entries) => {
  for (const entry of entries) {
    if (entry.detail.kind === constants.NODE_PERFORMANCE_GC_MINOR) {
      seen.scavenges++;
      seen.scavengeMs += entry.duration;
    } else if (entry.detail.kind === constants.NODE_PERFORMANCE_GC_MAJOR) {
      seen.markCompacts++;
      seen.markCompactMs += entry.duration;
    }
  }
};
const observer = new PerformanceObserver((list) => count(list.getEntries()));
watchWindow(
  () => {
    startedAt = performance.now();
    oldAtStart = oldSpace();
    observer.observe({ entryTypes: ['gc'] });
  },
  () => {
    count(observer.takeRecords());
    observer.disconnect();
    const seconds = (performance.now() - startedAt) / 1000;
    const mb = (bytes) => (bytes / 1e6).toFixed(1);
    const each = seen.scavenges === 0 ? 0 : seen.scavengeMs / seen.scavenges;
    process.stderr.write(
      `gc over ${seconds.toFixed(1)} s: ${seen.scavenges} scavenges, ${seen.scavengeMs.toFixed(0)} ms ` +
        `(${each.toFixed(2)} ms each); ${seen.markCompacts} mark-compacts, ${seen.markCompactMs.toFixed(0)} ms; ` +
        `old space ${mb(oldAtStart)} -> ${mb(oldSpace())} MB\n`,
    );
  },
);
