export { captureRawBody, type ExpressIdempotencyOptions, idempotency } from './idempotency.js';
