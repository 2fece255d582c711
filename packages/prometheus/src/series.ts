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

type Level = Map<string | undefined, Level | Cell>;

/** prom-client's default buckets, in seconds. */
const DEFAULT_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
// Prometheus's names: a metric's, and a label's (names starting `__` are Prometheus's own).
const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

type Labels<L extends string> = Readonly<Record<L, string>>;

/** What a {@link Series} counts, and where it is registered. */
export interface SeriesOptions<L extends string> {
  readonly name: string;
  readonly help: string;
  readonly type: 'counter' | 'gauge' | 'histogram';
  /** Its labels, in the order their values are looked up in. */
  readonly labelNames?: readonly L[];
  /** A histogram's upper bounds (its `le` values). @default prom-client's: 5 ms … 10 s in seconds (11 bounds) */
  readonly buckets?: readonly number[];
  readonly registers: readonly AnyRegistry[];
}

/**
 * A counter, gauge or histogram counted in cells of this process, one per label set, and read by prom-client's
 * registry when it collects (as the registry reads its own metrics: `get()`, `reset()`, the `aggregator` of a
 * cluster). prom-client's own metrics build a string of the labels on every `inc` and `observe`, check each
 * label, and look the string up; a listener that counts every keyed request's events cannot afford that
 * (docs/benchmarks.md). Here a label set's names are checked and its object made once, when it is first
 * counted, and a hit is a lookup per label value, whose strings are the same few every time. Values are checked
 * as prom-client checks them: a counter only goes up, by a finite number.
 *
 * Every label value is a string the caller has bounded (a route template, never a path; anything else is
 * counted as its text): each label set is kept until `reset`.
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
    const { name, type } = options;
    const labelNames = options.labelNames ?? [];
    if (!METRIC_NAME.test(name)) throw new Error(`"${name}" is not a metric name`);
    for (const label of labelNames) {
      if (!LABEL_NAME.test(label) || label.startsWith('__') || (type === 'histogram' && label === 'le')) {
        throw new Error(`"${label}" is not a label name ${name} may have`);
      }
    }
    if (new Set(labelNames).size !== labelNames.length) throw new Error(`${name} names a label twice`);
    this.name = name;
    this.help = options.help;
    this.type = type;
    this.labelNames = labelNames;
    if (type === 'histogram') {
      const bounds = [...new Set(options.buckets ?? DEFAULT_BUCKETS)].sort((a, b) => a - b);
      if (bounds.some((bound) => !Number.isFinite(bound))) {
        throw new RangeError(`the buckets of ${name} must be finite numbers`);
      }
      this.#bounds = Float64Array.from(bounds);
    }
    // As prom-client's: a series without labels reads 0 from the start.
    if (labelNames.length === 0) this.#make(undefined);
    for (const registry of options.registers) registry.registerMetric(this as unknown as Metric);
  }

  /** Add `by` (default 1: finite, and for a counter never negative) to the value of `labels`. */
  inc(labels?: Labels<L> | number, by = 1): void {
    if (typeof labels === 'number') {
      this.inc(undefined, labels); // prom-client's `inc(by)`
      return;
    }
    if (!Number.isFinite(by)) throw new TypeError(`${this.name} cannot count ${by}`);
    if (by < 0 && this.type === 'counter') throw new RangeError(`the counter ${this.name} cannot go down`);
    if (this.type === 'histogram') throw new TypeError(`${this.name} is a histogram: observe it`);
    this.#cellOf(labels).value += by;
  }

  /** Take `by` (default 1, finite) from a gauge's value of `labels`. */
  dec(labels?: Labels<L> | number, by = 1): void {
    if (typeof labels === 'number') {
      this.dec(undefined, labels);
      return;
    }
    if (this.type !== 'gauge') throw new TypeError(`${this.name} is a ${this.type}: only a gauge goes down`);
    if (!Number.isFinite(by)) throw new TypeError(`${this.name} cannot count ${by}`);
    this.#cellOf(labels).value -= by;
  }

  /**
   * A histogram's observation of `value` (in the unit of its buckets) for `labels` (or `observe(value)` without
   * labels); a value that is not a finite number is not observed.
   */
  observe(labels: Labels<L> | number, value?: number): void {
    if (typeof labels === 'number') {
      this.observe({} as Labels<L>, labels);
      return;
    }
    const bounds = this.#bounds;
    if (bounds === undefined)
      throw new TypeError(`${this.name} is a ${this.type}: only a histogram is observed`);
    if (value === undefined || !Number.isFinite(value)) return;
    const cell = this.#cellOf(labels);
    let at = 0;
    while (at < bounds.length && value > (bounds[at] as number)) at++;
    cell.value++;
    cell.sum += value;
    const buckets = cell.buckets as Float64Array;
    if (at < bounds.length) buckets[at] = (buckets[at] as number) + 1;
  }

  /** The cell of one label set (made the first time), found by its values in the order of `labelNames`. */
  #cellOf(labels: Labels<L> | undefined): Cell {
    const names = this.labelNames;
    if (names.length === 0) return this.#cells[0] ?? this.#make(undefined);
    const given = labels ?? ({} as Labels<L>); // as prom-client: a series of a labelled metric without labels
    let level = this.#root;
    const last = names.length - 1;
    for (let i = 0; i < last; i++) {
      const value = labelValue(given[names[i] as L]);
      let next = level.get(value) as Level | undefined;
      if (next === undefined) {
        next = new Map();
        level.set(value, next);
      }
      level = next;
    }
    const value = labelValue(given[names[last] as L]);
    const found = level.get(value) as Cell | undefined;
    if (found !== undefined) return found;
    const cell = this.#make(given);
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

  /** Every label set forgotten, as prom-client's `reset`: a counter or gauge without labels reads 0 again. */
  reset(): void {
    this.#root = new Map();
    this.#cells = [];
    if (this.labelNames.length === 0 && this.type !== 'histogram') this.#make(undefined);
  }

  /** A new cell of `given`'s values (copied: the caller's object is its own), counted from zero. */
  #make(given: Labels<L> | undefined): Cell {
    const labels: Record<string, string> = {};
    for (const name in given) {
      if (!this.labelNames.includes(name as L)) {
        throw new Error(`"${name}" is not one of the labels of ${this.name}: ${this.labelNames.join(', ')}`);
      }
    }
    for (const name of this.labelNames) {
      const value = labelValue(given?.[name]);
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

/** A label's value as it is counted: its text (a number's too), or none. */
const labelValue = (value: unknown): string | undefined =>
  typeof value === 'string' || value === undefined ? value : String(value);
