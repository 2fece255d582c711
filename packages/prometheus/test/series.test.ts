import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { describe, expect, test } from 'vitest';
import { type AnyRegistry, Series } from '../src/series.js';

// The series are counted in cells of their own, and read by prom-client's registry: what a scrape shows must be
// what prom-client's own Counter, Gauge and Histogram show for the same calls, in either format, default
// labels and all.

const BUCKETS = [0.005, 0.01, 0.05, 0.1, 1];
const OBSERVED = [0, 0.005, 0.0051, 0.07, 0.1, 0.5, 1, 3, 1e9];

/** The same calls on prom-client's metrics (in `theirs`) and on series (in `ours`). */
function fill(theirs: AnyRegistry, ours: AnyRegistry) {
  const labelNames = ['method', 'status', 'operation'] as const;
  const counter = new Counter({ name: 'c_total', help: 'c', labelNames, registers: [theirs] });
  const series = new Series({ name: 'c_total', help: 'c', type: 'counter', labelNames, registers: [ours] });
  const gauge = new Gauge({ name: 'g_count', help: 'g', labelNames: ['operation'], registers: [theirs] });
  const gaugeSeries = new Series({
    name: 'g_count',
    help: 'g',
    type: 'gauge',
    labelNames: ['operation'],
    registers: [ours],
  });
  const histogram = new Histogram({
    name: 'h_seconds',
    help: 'h',
    labelNames: ['operation', 'status'],
    buckets: BUCKETS,
    registers: [theirs],
  });
  const histogramSeries = new Series({
    name: 'h_seconds',
    help: 'h',
    type: 'histogram',
    labelNames: ['operation', 'status'],
    buckets: BUCKETS,
    registers: [ours],
  });
  const plain = new Counter({ name: 'p_total', help: 'p', registers: [theirs] });
  const plainSeries = new Series({ name: 'p_total', help: 'p', type: 'counter', registers: [ours] });
  const untouched = new Counter({ name: 'u_total', help: 'u', registers: [theirs] });
  new Series({ name: 'u_total', help: 'u', type: 'counter', registers: [ours] });

  for (const [method, status, operation] of [
    ['POST', '201', '/orders'],
    ['POST', '201', '/orders'],
    ['PUT', '201', '/orders'],
    ['POST', '409', '/orders'],
    ['POST', '201', 'a "quoted"\\ name\n'],
  ] as const) {
    counter.inc({ method, status, operation });
    series.inc({ method, status, operation });
  }
  counter.inc({ method: 'POST', status: '201', operation: '/orders' }, 5);
  series.inc({ method: 'POST', status: '201', operation: '/orders' }, 5);
  for (const operation of ['/orders', '/orders', '/refunds']) {
    gauge.inc({ operation });
    gaugeSeries.inc({ operation });
  }
  gauge.dec({ operation: '/orders' });
  gaugeSeries.dec({ operation: '/orders' });
  for (const [index, seconds] of OBSERVED.entries()) {
    const labels = { operation: index % 2 === 0 ? '/orders' : '/refunds', status: '201' };
    histogram.observe(labels, seconds);
    histogramSeries.observe(labels, seconds);
  }
  plain.inc(3);
  plainSeries.inc({}, 3);
  void untouched;
}

describe('series read by prom-client’s registry', () => {
  test.each([
    ['Prometheus', Registry.PROMETHEUS_CONTENT_TYPE],
    ['OpenMetrics', Registry.OPENMETRICS_CONTENT_TYPE],
  ] as const)('the same text as prom-client’s own metrics (%s), default labels too', async (_name, type) => {
    const theirs = new Registry<typeof type>();
    const ours = new Registry<typeof type>();
    for (const registry of [theirs, ours]) registry.setContentType(type);
    fill(theirs, ours);
    expect(await ours.metrics()).toBe(await theirs.metrics());
    // A second scrape reads the same (OpenMetrics renames counters as it reads them).
    expect(await ours.metrics()).toBe(await theirs.metrics());
    for (const registry of [theirs, ours]) registry.setDefaultLabels({ node: 'n1' });
    expect(await ours.metrics()).toBe(await theirs.metrics());
    // (prom-client's buckets say `exemplar: null` when exemplars are off.)
    const withoutExemplars = async (registry: AnyRegistry) =>
      JSON.parse(
        JSON.stringify(await registry.getMetricsAsJSON(), (name, value) =>
          name === 'exemplar' ? undefined : value,
        ),
      );
    expect(await withoutExemplars(ours)).toEqual(await withoutExemplars(theirs));
  });

  test('resetMetrics forgets every label set, and a series without labels reads 0 again', async () => {
    const theirs = new Registry();
    const ours = new Registry();
    fill(theirs, ours);
    theirs.resetMetrics();
    ours.resetMetrics();
    expect(await ours.metrics()).toBe(await theirs.metrics());
    expect(await ours.metrics()).toContain('p_total 0');
  });

  test('a value that is not a finite number is not observed', async () => {
    const registry = new Registry();
    const series = new Series({
      name: 'h_seconds',
      help: 'h',
      type: 'histogram',
      labelNames: ['operation'],
      buckets: BUCKETS,
      registers: [registry],
    });
    series.observe({ operation: 'x' }, Number.NaN);
    series.observe({ operation: 'x' }, Number.POSITIVE_INFINITY);
    series.observe({ operation: 'x' }, 0.2);
    const text = await registry.metrics();
    expect(text).toContain('h_seconds_count{operation="x"} 1');
    expect(text).toContain('h_seconds_sum{operation="x"} 0.2');
  });
});

describe('what a series refuses, as prom-client’s metrics do', () => {
  const make = (type: 'counter' | 'gauge' | 'histogram', labelNames: string[] = ['status']) =>
    new Series({ name: `x_${type}`, help: 'x', type, labelNames, registers: [new Registry()] });

  test('a counter only goes up, by a finite number; only a gauge goes down; only a histogram is observed', () => {
    const counter = make('counter');
    expect(() => counter.inc({ status: '200' }, -1)).toThrow(/cannot go down/);
    expect(() => counter.inc({ status: '200' }, Number.NaN)).toThrow(/cannot count/);
    expect(() => counter.inc({ status: '200' }, Number.POSITIVE_INFINITY)).toThrow(/cannot count/);
    expect(() => counter.dec({ status: '200' })).toThrow(/only a gauge/);
    expect(() => counter.observe({ status: '200' }, 1)).toThrow(/only a histogram/);
    expect(() => make('histogram').inc({ status: '200' })).toThrow(/observe it/);
    expect(() => make('gauge').dec({ status: '200' }, Number.NaN)).toThrow(/cannot count/);
  });

  test('names: a metric’s and its labels’ as Prometheus has them, no label twice, no `le` on a histogram', () => {
    const named =
      (name: string, labelNames: string[], type: 'counter' | 'histogram' = 'counter') =>
      () =>
        new Series({ name, help: 'x', type, labelNames, registers: [new Registry()] });
    expect(named('bad-name', [])).toThrow(/not a metric name/);
    expect(named('ok', ['bad-label'])).toThrow(/not a label name/);
    expect(named('ok', ['__reserved'])).toThrow(/not a label name/);
    expect(named('ok', ['le'], 'histogram')).toThrow(/not a label name/);
    expect(named('ok', ['a', 'a'])).toThrow(/twice/);
    expect(named('ok', ['le'])).not.toThrow(); // only a histogram's buckets are `le`
  });

  test('a label set is checked when it is first counted: a label the series does not have is refused', () => {
    const counter = make('counter');
    expect(() => counter.inc({ status: '200', route: '/x' } as unknown as { status: string })).toThrow(
      /not one of the labels/,
    );
  });

  test('a label value that is not a string is counted as its text: one series, not two alike', async () => {
    const registry = new Registry();
    const counter = new Series({
      name: 'c_total',
      help: 'c',
      type: 'counter',
      labelNames: ['status'],
      registers: [registry],
    });
    counter.inc({ status: 200 } as unknown as { status: string });
    counter.inc({ status: '200' });
    expect((await registry.metrics()).match(/c_total\{status="200"\} 2/g)).toHaveLength(1);
  });

  test('without labels: inc(by) and observe(value) as prom-client takes them, its default buckets, and its reset', async () => {
    const theirs = new Registry();
    const ours = new Registry();
    const counter = new Counter({ name: 'c_total', help: 'c', registers: [theirs] });
    const histogram = new Histogram({ name: 'h_seconds', help: 'h', registers: [theirs] });
    const counterSeries = new Series({ name: 'c_total', help: 'c', type: 'counter', registers: [ours] });
    const histogramSeries = new Series({
      name: 'h_seconds',
      help: 'h',
      type: 'histogram',
      registers: [ours],
    });
    counter.inc(5);
    counterSeries.inc(5);
    for (const seconds of [0.003, 0.2, 7]) {
      histogram.observe(seconds);
      histogramSeries.observe(seconds);
    }
    expect(await ours.metrics()).toBe(await theirs.metrics());
    theirs.resetMetrics();
    ours.resetMetrics();
    expect(await ours.metrics()).toBe(await theirs.metrics());
  });
});
