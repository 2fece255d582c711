export {
  type HonoIdempotencyOptions,
  type IdempotencyEnv,
  type IdempotencyMiddleware,
  type IdempotencyVariables,
  idempotency,
  type RouteIdempotencyOptions,
} from './middleware.js';
