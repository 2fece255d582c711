export type { FastifyIdempotencyOptions, RouteIdempotencyOptions } from './plugin.js';
export { fastifyIdempotency, sendReplay } from './plugin.js';
