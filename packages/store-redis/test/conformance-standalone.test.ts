import { storeConformance } from '@idem/store-conformance';
import { describe, test } from 'vitest';
import { NATIVE_EXPIRY, redisStoreFactory, redisUp } from './support/servers.js';

const up = await redisUp();

describe.runIf(up)('standalone Redis, ioredis (a client per instance)', () => {
  storeConformance({ describe, test }, redisStoreFactory('ioredis'), NATIVE_EXPIRY);
});

describe.runIf(up)('standalone Redis, node-redis (a client per instance)', () => {
  storeConformance({ describe, test }, redisStoreFactory('node-redis'), NATIVE_EXPIRY);
});
