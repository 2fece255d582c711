export {
  executionOf,
  type FastifyIdempotencyOptions,
  fastifyIdempotency,
  idempotency,
  type RouteIdempotencyOptions,
} from './plugin.js';
