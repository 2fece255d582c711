export {
  IDEMPOTENCY_OPTIONS,
  IdempotencyInterceptor,
  IdempotencyModule,
  type IdempotencyModuleAsyncOptions,
  Idempotent,
  type IdempotentOptions,
  type NestHttpRequest,
  type NestIdempotencyOptions,
} from './idempotency.js';
