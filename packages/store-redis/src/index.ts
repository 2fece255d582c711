export type { ReplicaAck } from './clients/connection.js';
export { createRedisStore, type RedisStore, type RedisStoreOptions } from './create-redis-store.js';
export { DEFAULT_PREFIX, recordKey } from './key-layout.js';
export { MAX_HEADERS_BYTES, MAX_IDENTIFIER_CHARS } from './limits.js';
