export {
  type AnyRegistry,
  createIdempotencyMetrics,
  DEFAULT_BUCKETS_SECONDS,
  ErrorType,
  type IdempotencyMetrics,
  type IdempotencyMetricsOptions,
  PURGE_OPERATION,
} from './idempotency-metrics.js';
export { NONE, OTHER } from './labels.js';
export { Series, type SeriesOptions } from './series.js';
