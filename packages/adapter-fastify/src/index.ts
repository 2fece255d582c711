export {
  type FastifyIdempotencyOptions,
  fastifyIdempotency,
  type RouteIdempotencyOptions,
} from './plugin.js';
