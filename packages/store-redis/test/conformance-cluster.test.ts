import { storeConformance } from '@idem/store-conformance';
import { describe, test } from 'vitest';
import { clusterUp, KIT_OPTIONS, redisStoreFactory } from './support/servers.js';

const up = await clusterUp();

describe.runIf(up)('Redis Cluster of 3 masters, ioredis Cluster (a client per instance)', () => {
  storeConformance({ describe, test }, redisStoreFactory('ioredis Cluster'), KIT_OPTIONS);
});

describe.runIf(up)('Redis Cluster of 3 masters, node-redis cluster (a client per instance)', () => {
  storeConformance({ describe, test }, redisStoreFactory('node-redis cluster'), KIT_OPTIONS);
});
