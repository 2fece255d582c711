export {
  executionOf,
  type FastifyIdempotencyOptions,
  idempotency,
  idempotency as default,
  type RouteIdempotencyOptions,
} from './plugin.js';
