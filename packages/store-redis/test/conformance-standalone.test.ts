import { storeConformance } from '@idem/store-conformance';
import { describe, test } from 'vitest';
import { KIT_OPTIONS, redisStoreFactory, redisUp } from './support/servers.js';

const up = await redisUp();

describe.runIf(up)('standalone Redis, ioredis (a client per instance)', () => {
  storeConformance({ describe, test }, redisStoreFactory('ioredis'), KIT_OPTIONS);
});

describe.runIf(up)('standalone Redis, node-redis (a client per instance)', () => {
  storeConformance({ describe, test }, redisStoreFactory('node-redis'), KIT_OPTIONS);
});
