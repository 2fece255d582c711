// pnpm loadtest: latency against throughput. The catalog (SQLite; PostgreSQL with 1 and with 3 nodes) is driven
// at a series of fixed arrival rates up to saturation with a mix of namespace creates, table commits and
// table loads, 10 % of the mutations retried with their key, with and without keys. Prints p50 / p95 / p99 and
// the throughput achieved per rate, and writes a chart (SVG, vega-lite) next to the catalog's latency targets (p50 < 20 ms, p95 < 50 ms, p99 < 100 ms).
import { writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { v7 } from 'uuid';
import * as vega from 'vega';
import * as vl from 'vega-lite';
import { machine } from '../../../scripts/bench.js';
import { freshPostgres } from '../test/support/databases.js';
import { next, type Operation, prepare, type Server, startCatalog } from './catalog-load.js';

const SECONDS = Number(process.env.LOADTEST_SECONDS ?? 6);
const RATES = (process.env.LOADTEST_RATES ?? '50,100,200,300,400,500,600,800,1200').split(',').map(Number);
const TARGETS = { p50: 20, p95: 50, p99: 100 } as const; // the catalog's latency targets, ms
const SETUPS = (process.env.LOADTEST_SETUPS ?? 'sqlite,postgres-1,postgres-3').split(',');
const CHART = new URL('../docs/latency.svg', import.meta.url).pathname;

/** The mix: 20 % creates, 30 % commits, 50 % loads; 10 % of the mutations are a retry of the one before. */
function pick(): Operation {
  const r = Math.random();
  return r < 0.2 ? 'create' : r < 0.5 ? 'commit' : 'load';
}

interface Point {
  readonly setup: string;
  readonly keyed: boolean;
  readonly rate: number;
  readonly achieved: number;
  readonly p50: number;
  readonly p95: number;
  readonly p99: number;
  readonly errors: number;
  readonly dropped: number;
}

/** The most requests a run keeps in flight; past it the server is saturated and further arrivals are dropped. */
const MAX_IN_FLIGHT = 256;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Drive `urls` (round robin) at `rate` requests per second in all: an open loop, one arrival every 1/rate
 * seconds whatever the answers do, each latency measured from the moment the request was due (so a server
 * that falls behind is charged for the wait, not only for the service: no coordinated omission). A
 * rate-limited closed loop (autocannon's `overallRate`) sends each second's requests in a burst, which turns
 * queueing behind the burst into latency at any rate.
 */
async function driveMix(urls: readonly string[], keyed: boolean, rate: number, seconds: number) {
  const times: number[] = [];
  let errors = 0;
  let dropped = 0;
  let last: { path: string; body?: string; key: string } | undefined;
  const inFlight = new Set<Promise<void>>();
  const interval = 1000 / rate;
  const total = Math.round(rate * seconds);
  const started = performance.now();
  for (let i = 0; i < total; i++) {
    const due = started + i * interval;
    const wait = due - performance.now();
    if (wait >= 1) await sleep(wait);
    if (inFlight.size >= MAX_IN_FLIGHT) {
      dropped++;
      continue;
    }
    // 10 % of the mutations are a retry of the one before, with its key.
    const retry = last !== undefined && Math.random() < 0.1;
    const chosen =
      retry && last !== undefined ? { method: 'POST' as const, ...last } : { ...next(pick()), key: v7() };
    if (chosen.method === 'POST') {
      last = {
        path: chosen.path,
        key: chosen.key,
        ...(chosen.body === undefined ? {} : { body: chosen.body }),
      };
    }
    const request = fetch(`${urls[i % urls.length]}${chosen.path}`, {
      method: chosen.method,
      headers: {
        'content-type': 'application/json',
        ...(keyed && chosen.method === 'POST' ? { 'idempotency-key': chosen.key } : {}),
      },
      ...(chosen.body === undefined ? {} : { body: chosen.body }),
    }).then(
      async (response) => {
        await response.arrayBuffer();
        // A 409 is a commit that lost to a retry of itself; a 503 a duplicate still in progress.
        if (response.status >= 500) errors++;
        times.push(performance.now() - due);
      },
      () => {
        errors++;
      },
    );
    inFlight.add(request);
    void request.finally(() => inFlight.delete(request));
  }
  await Promise.all(inFlight);
  const elapsed = (performance.now() - started) / 1000;
  times.sort((a, b) => a - b);
  const at = (q: number) => times[Math.min(times.length - 1, Math.floor(q * times.length))] ?? Number.NaN;
  return {
    achieved: times.length / elapsed,
    p50: at(0.5),
    p95: at(0.95),
    p99: at(0.99),
    errors,
    dropped,
  };
}

async function start(setup: string): Promise<{ urls: string[]; stop(): Promise<void> }> {
  if (setup === 'sqlite') {
    const server = await startCatalog({
      DATABASE_URL: `sqlite:${tmpdir()}/idem-loadtest-${process.pid}-${Date.now()}.db`,
    });
    return { urls: [server.url], stop: () => server.stop() };
  }
  const nodes = Number(setup.split('-')[1] ?? 1);
  const database = await freshPostgres();
  const warehouse = `${tmpdir()}/idem-loadtest-warehouse-${process.pid}-${Date.now()}`;
  const servers: Server[] = [];
  for (let i = 0; i < nodes; i++) {
    servers.push(await startCatalog({ DATABASE_URL: database.url, WAREHOUSE: warehouse }, 0));
  }
  return {
    urls: servers.map((s) => s.url),
    stop: async () => {
      for (const server of servers) await server.stop();
      await database.drop();
    },
  };
}

console.log(`machine: ${machine()}`);
const points: Point[] = [];
for (const setup of SETUPS) {
  for (const keyed of [false, true]) {
    console.log(`\n${setup}, ${keyed ? 'with' : 'without'} keys: rate → achieved, p50 / p95 / p99 (ms)`);
    let saturated: number | undefined;
    for (const rate of RATES) {
      const { urls, stop } = await start(setup);
      try {
        await prepare(urls[0] as string);
        await driveMix(urls, keyed, Math.min(rate, 200), 1); // warm-up
        const r = await driveMix(urls, keyed, rate, SECONDS);
        points.push({ setup, keyed, rate, ...r });
        const meets =
          r.p50 <= TARGETS.p50 &&
          r.p95 <= TARGETS.p95 &&
          r.p99 <= TARGETS.p99 &&
          r.dropped === 0 &&
          r.errors === 0;
        const ms = (n: number) => n.toFixed(1);
        console.log(
          `  ${String(rate).padStart(5)} /s → ${r.achieved.toFixed(0).padStart(5)} /s, ${ms(r.p50)} / ${ms(r.p95)} / ${ms(r.p99)}${meets ? '' : '  (misses the targets)'}${r.errors > 0 ? `, ${r.errors} errors` : ''}${r.dropped > 0 ? `, ${r.dropped} arrivals dropped (${MAX_IN_FLIGHT} in flight)` : ''}`,
        );
        // Saturated: the server no longer keeps up with the arrival rate.
        if (r.achieved < rate * 0.9) {
          saturated = r.achieved;
          break;
        }
      } finally {
        await stop();
      }
    }
    const meeting = points.filter(
      (p) =>
        p.setup === setup &&
        p.keyed === keyed &&
        p.p50 <= TARGETS.p50 &&
        p.p95 <= TARGETS.p95 &&
        p.p99 <= TARGETS.p99,
    );
    const best = meeting.reduce((a, p) => Math.max(a, p.achieved), 0);
    console.log(
      `  highest rate within p50 < ${TARGETS.p50} ms, p95 < ${TARGETS.p95} ms, p99 < ${TARGETS.p99} ms: ${best.toFixed(0)} /s`,
    );
    // One node on one core (taskset): at saturation, the core's time per request is what a request costs.
    if (saturated !== undefined && setup !== 'postgres-3')
      console.log(
        `  server core time per request at saturation (${saturated.toFixed(0)} /s): ${((1 / saturated) * 1e6).toFixed(0)} µs`,
      );
    else if (saturated === undefined) console.log(`  not saturated up to ${RATES.at(-1)} /s`);
  }
}

// The chart: one panel per setup, latency percentiles against throughput achieved, keyed and unkeyed.
const values = points.flatMap((p) =>
  (['p50', 'p95', 'p99'] as const).map((q) => ({
    setup: p.setup,
    series: `${q}${p.keyed ? ' (keyed)' : ''}`,
    throughput: Math.round(p.achieved),
    latency: p[q],
  })),
);
const rules = Object.entries(TARGETS).map(([q, ms]) => ({ target: `${q} target ${ms} ms`, ms }));
const spec = vl.compile({
  $schema: 'https://vega.github.io/schema/vega-lite/v5.json',
  title: `Reference catalog: latency against throughput (${machine()})`,
  data: { values },
  facet: { column: { field: 'setup', type: 'nominal', title: null } },
  spec: {
    width: 320,
    height: 260,
    layer: [
      {
        mark: { type: 'line', point: true },
        encoding: {
          x: { field: 'throughput', type: 'quantitative', title: 'requests/s achieved' },
          y: { field: 'latency', type: 'quantitative', title: 'latency (ms)', scale: { type: 'log' } },
          color: { field: 'series', type: 'nominal', title: null },
        },
      },
      {
        data: { values: rules },
        mark: { type: 'rule', strokeDash: [4, 4] },
        encoding: { y: { field: 'ms', type: 'quantitative' }, color: { value: 'gray' } },
      },
    ],
  },
} as vl.TopLevelSpec).spec;
writeFileSync(CHART, await new vega.View(vega.parse(spec), { renderer: 'none' }).toSVG());
console.log(`\nchart: ${CHART}`);
