// pnpm bench: what the listener costs per request, against prom-client's own metrics fed the same series and
// labels (the baseline: what @idem/prometheus did before its series were counted in cells), and a floor that
// only counts each request in a plain object. Two requests: a keyed one that executes (`reserved`, then
// `finalized`) and a retry answered from a replay cache (`cache`, then `replayed`).
import type { IdempotencyEvent } from '@idem/core';
import { createIdempotencyMetrics } from '@idem/prometheus';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { machine, measure, printTable, ratio } from '../../../scripts/bench.js';

const ROUTE = '/v1/:prefix/namespaces';
const operation = ({ route }: { route: string }) => route.replace(/^\/v1\/:prefix\//, '/v1/');

let owners = 0;
/** One keyed request's events, as the coordinator emits them (every field written out, as it builds them). */
function executed(): IdempotencyEvent[] {
  const owner = String(owners++);
  const [scope, key, method, route] = ['s', 'k', 'POST', ROUTE];
  return [
    { type: 'reserved', scope, key, method, route, owner, durationMs: 1, elapsedMs: 2, tookOver: false },
    {
      type: 'finalized',
      scope,
      key,
      method,
      route,
      owner,
      durationMs: 1,
      executionMs: 5,
      status: 200,
      external: false,
    },
  ];
}
/** One retry's events, answered from a replay cache. */
function replayed(): IdempotencyEvent[] {
  return [
    { type: 'cache', outcome: 'hit', operation: 'reserve', scope: 's', key: 'k' },
    { type: 'replayed', scope: 's', key: 'k', method: 'POST', route: ROUTE, status: 200, elapsedMs: 1 },
  ];
}

/** The same series through prom-client's Counter, Gauge and Histogram, for these four events. */
function promClientListener() {
  const registers = [new Registry()];
  const requests = new Counter({
    name: 'r',
    help: 'r',
    labelNames: ['method', 'status', 'operation'],
    registers,
  });
  const duration = new Histogram({
    name: 'd',
    help: 'd',
    labelNames: ['operation', 'status'],
    buckets: [0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10],
    registers,
  });
  const active = new Gauge({ name: 'a', help: 'a', labelNames: ['operation'], registers });
  const replays = new Counter({ name: 'p', help: 'p', labelNames: ['operation'], registers });
  const hits = new Counter({ name: 'h', help: 'h', labelNames: ['operation'], registers });
  const started = new Map<string, number>();
  const answered = (event: { method: string; route: string }, status: number, seconds: number) => {
    const labels = { operation: operation(event), status: String(status) };
    requests.inc({ method: event.method.toUpperCase(), ...labels });
    duration.observe(labels, seconds);
  };
  return (event: IdempotencyEvent): void => {
    switch (event.type) {
      case 'reserved':
        started.set(event.owner, event.elapsedMs);
        active.inc({ operation: operation(event) });
        return;
      case 'finalized':
        active.dec({ operation: operation(event) });
        answered(event, event.status, ((started.get(event.owner) ?? 0) + event.executionMs) / 1000);
        started.delete(event.owner);
        return;
      case 'cache':
        hits.inc({ operation: event.operation });
        return;
      case 'replayed':
        replays.inc({ operation: operation(event) });
        answered(event, event.status, event.elapsedMs / 1000);
        return;
    }
  };
}

/** The floor: each event counted by its type in a plain object. */
function floorListener() {
  const counts: Record<string, number> = {};
  return (event: IdempotencyEvent): void => {
    counts[event.type] = (counts[event.type] ?? 0) + 1;
  };
}

const listeners = {
  floor: floorListener(),
  'prom-client metrics': promClientListener(),
  '@idem/prometheus': createIdempotencyMetrics({ registry: new Registry(), operation }).onEvent,
};

console.log(`machine: ${machine()}`);
for (const [name, request] of [
  ['a keyed request that executes', executed],
  ['a retry answered from a replay cache', replayed],
] as const) {
  const tasks = Object.fromEntries(
    Object.entries(listeners).map(([variant, listener]) => [
      variant,
      () => {
        for (const event of request()) listener(event);
      },
    ]),
  );
  const rates = await measure(tasks);
  const ns = (variant: string) => 1e9 / (rates[variant] as number);
  const theirs = ns('prom-client metrics');
  printTable(
    `${name}: ns per request (its events made and listened to), and prom-client's metrics' time over this one's`,
    Object.keys(listeners).map((variant) => [
      variant,
      `${ns(variant).toFixed(0)} ns  (${ratio(theirs / ns(variant))})`,
    ]),
  );
}
