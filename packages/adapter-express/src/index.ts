export { captureRawBody, type ExpressIdempotencyOptions, idempotencyMiddleware } from './idempotency.js';
