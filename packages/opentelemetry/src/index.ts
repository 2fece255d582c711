export {
  Attribute,
  createIdempotencyTracing,
  type IdempotencyTracing,
  type IdempotencyTracingOptions,
  SpanName,
} from './idempotency-tracing.js';
