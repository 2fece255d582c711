import { storeConformance } from '@idem/store-conformance';
import { describe, test } from 'vitest';
import { clusterUp, NATIVE_EXPIRY, redisStoreFactory } from './support/servers.js';

const up = await clusterUp();

describe.runIf(up)('Redis Cluster of 3 masters, ioredis Cluster (a client per instance)', () => {
  storeConformance({ describe, test }, redisStoreFactory('ioredis Cluster'), NATIVE_EXPIRY);
});

describe.runIf(up)('Redis Cluster of 3 masters, node-redis cluster (a client per instance)', () => {
  storeConformance({ describe, test }, redisStoreFactory('node-redis cluster'), NATIVE_EXPIRY);
});
