export {
  captureRawBody,
  type ExpressIdempotencyOptions,
  idempotency,
  idempotencyMiddleware,
} from './idempotency.js';
