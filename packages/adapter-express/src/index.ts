export { type ExpressIdempotencyOptions, idempotency } from './idempotency.js';
