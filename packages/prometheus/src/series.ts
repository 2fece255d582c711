import type { Metric, OpenMetricsContentType, PrometheusContentType, Registry } from 'prom-client';

/** A prom-client registry of either exposition format. */
export type AnyRegistry = Registry<PrometheusContentType> | Registry<OpenMetricsContentType>;

/**
 * One label set's numbers: a counter's or a gauge's value; a histogram's count (`value`), sum and count per
 * bucket (not cumulative: added up when the registry reads them).
 */
interface Cell {
  readonly labels: Readonly<Record<string, string>>;
  value: number;
  sum: number;
  readonly buckets: Float64Array | undefined;
}

/** A value as prom-client's registry reads it from a metric (`get()`). */
interface Value {
  readonly value: number;
  readonly labels: Readonly<Record<string, string | number>>;
  readonly sharedLabels?: Readonly<Record<string, string>>;
  readonly metricName?: string;
}

/** A metric as prom-client's registry reads it. */
interface Read {
  readonly name: string;
  readonly help: string;
  readonly type: string;
  readonly values: Value[];
  readonly aggregator: 'sum';
}

type Level = Map<string, Level | Cell>;

/** What a {@link Series} counts, and where it is registered. */
export interface SeriesOptions<L extends string> {
  readonly name: string;
  readonly help: string;
  readonly type: 'counter' | 'gauge' | 'histogram';
  /** Its labels, in the order their values are looked up in. */
  readonly labelNames?: readonly L[];
  /** A histogram's upper bounds (its `le` values). */
  readonly buckets?: readonly number[];
  readonly registers: readonly AnyRegistry[];
}

/**
 * A counter, gauge or histogram counted in cells of this process, one per label set, and read by prom-client's
 * registry when it collects (as the registry reads its own metrics: `get()`, `reset()`, the `aggregator` of a
 * cluster). prom-client's own metrics build a string of the labels on every `inc` and `observe`, check each
 * label, and look the string up; a listener that counts every keyed request's events cannot afford that
 * (docs/benchmarks.md: about a tenth of a cached replay). Here the labels are checked and their object made
 * once per label set, and a hit is a lookup per label value, whose strings are the same few every time.
 *
 * Every label value is a string the caller has bounded (a route template, never a path): each label set is
 * kept until `reset`.
 *
 * @example
 * const requests = new Series({ name: 'http_requests_total', help: '…', type: 'counter', labelNames: ['route'], registers: [registry] });
 * requests.inc({ route: '/orders' });
 */
export class Series<L extends string = never> {
  /** Written by prom-client's registry, which renames an OpenMetrics counter as it collects it. */
  name: string;
  readonly help: string;
  readonly type: 'counter' | 'gauge' | 'histogram';
  readonly labelNames: readonly L[];
  readonly aggregator = 'sum';
  /** A histogram's upper bounds, ascending. */
  readonly #bounds: Float64Array | undefined;
  #root: Level = new Map();
  #cells: Cell[] = [];

  constructor(options: SeriesOptions<L>) {
    this.name = options.name;
    this.help = options.help;
    this.type = options.type;
    this.labelNames = options.labelNames ?? [];
    if (options.type === 'histogram') {
      const bounds = [...new Set(options.buckets ?? [])].sort((a, b) => a - b);
      if (bounds.some((bound) => !Number.isFinite(bound))) {
        throw new RangeError(`the buckets of ${options.name} must be finite numbers`);
      }
      this.#bounds = Float64Array.from(bounds);
    }
    this.reset();
    for (const registry of options.registers) registry.registerMetric(this as unknown as Metric);
  }

  /** Add `by` (default 1) to the value of `labels`. */
  inc(labels?: Readonly<Record<L, string>>, by = 1): void {
    this.#cellOf(labels).value += by;
  }

  /** Take `by` (default 1) from a gauge's value of `labels`. */
  dec(labels?: Readonly<Record<L, string>>, by = 1): void {
    this.#cellOf(labels).value -= by;
  }

  /** A histogram's observation of `value` (in the unit of its buckets) for `labels`; not a number: ignored. */
  observe(labels: Readonly<Record<L, string>>, value: number): void {
    if (!Number.isFinite(value)) return;
    const cell = this.#cellOf(labels);
    const bounds = this.#bounds as Float64Array;
    let at = 0;
    while (at < bounds.length && value > (bounds[at] as number)) at++;
    cell.value++;
    cell.sum += value;
    if (at < bounds.length)
      (cell.buckets as Float64Array)[at] = ((cell.buckets as Float64Array)[at] as number) + 1;
  }

  /** The cell of one label set (made the first time), found by its values in the order of `labelNames`. */
  #cellOf(labels: Readonly<Record<L, string>> | undefined): Cell {
    const names = this.labelNames;
    if (names.length === 0) return this.#cells[0] as Cell;
    labels ??= {} as Readonly<Record<L, string>>; // prom-client's series without labels
    let level = this.#root;
    const last = names.length - 1;
    for (let i = 0; i < last; i++) {
      const value = labels[names[i] as L];
      let next = level.get(value) as Level | undefined;
      if (next === undefined) {
        next = new Map();
        level.set(value, next);
      }
      level = next;
    }
    const value = labels[names[last] as L];
    const found = level.get(value) as Cell | undefined;
    if (found !== undefined) return found;
    const cell = this.#make(labels);
    level.set(value, cell);
    return cell;
  }

  /** What the registry reads, as prom-client's own metrics give it: a histogram's labels with its `le` first. */
  async get(): Promise<Read> {
    return this.#read(false);
  }

  /**
   * What the registry reads for its text, as prom-client's histogram gives it: a bucket's `le` apart from the
   * labels it shares with its series, so that default labels go between them, as they do for prom-client's.
   */
  async getForPromString(): Promise<Read> {
    return this.#read(true);
  }

  #read(shared: boolean): Read {
    const values: Value[] = [];
    const bounds = this.#bounds;
    for (const cell of this.#cells) {
      if (bounds === undefined) {
        values.push({ value: cell.value, labels: cell.labels });
        continue;
      }
      const { labels } = cell;
      const bucket = `${this.name}_bucket`;
      const at = (le: number | string): Value =>
        shared
          ? { value: 0, labels: { le }, sharedLabels: labels, metricName: bucket }
          : { value: 0, labels: { le, ...labels }, metricName: bucket };
      const buckets = cell.buckets as Float64Array;
      let total = 0;
      for (let i = 0; i < bounds.length; i++) {
        total += buckets[i] as number;
        values.push({ ...at(bounds[i] as number), value: total });
      }
      values.push({ ...at('+Inf'), value: cell.value });
      const whole = shared ? { labels: {}, sharedLabels: labels } : { labels };
      values.push({ value: cell.sum, ...whole, metricName: `${this.name}_sum` });
      values.push({ value: cell.value, ...whole, metricName: `${this.name}_count` });
    }
    return { name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator };
  }

  /** Every label set forgotten; a series without labels back at zero. */
  reset(): void {
    this.#root = new Map();
    this.#cells = [];
    if (this.labelNames.length === 0) this.#make(undefined);
  }

  /** A new cell of `given`'s values (copied: the caller's object is its own), counted from zero. */
  #make(given: Readonly<Record<L, string>> | undefined): Cell {
    const labels: Record<string, string> = {};
    for (const name of this.labelNames) {
      const value = given?.[name];
      if (value !== undefined) labels[name] = value;
    }
    const bounds = this.#bounds;
    const cell: Cell = {
      labels,
      value: 0,
      sum: 0,
      buckets: bounds === undefined ? undefined : new Float64Array(bounds.length),
    };
    this.#cells.push(cell);
    return cell;
  }
}
