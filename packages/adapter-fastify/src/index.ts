export {
  executionOf,
  type FastifyIdempotencyOptions,
  fastifyIdempotency,
  fastifyIdempotency as default,
  idempotency,
  type RouteIdempotencyOptions,
} from './plugin.js';
