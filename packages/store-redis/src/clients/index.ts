import { type RedisConnection, refusingQueued } from './connection.js';
import { ioredisConnection, isIoredis } from './ioredis.js';
import {
  isNodeRedisClient,
  isNodeRedisCluster,
  nodeRedisClientConnection,
  nodeRedisClusterConnection,
} from './node-redis.js';

/**
 * The connection over a user's client: ioredis `Redis` / `Cluster`, node-redis `createClient` /
 * `createCluster`. Anything else (a node-redis pool or sentinel, another library) is refused with a TypeError.
 */
export function connectionOf(client: unknown): RedisConnection {
  if (isIoredis(client)) return refusingQueued(ioredisConnection(client));
  if (isNodeRedisCluster(client)) return refusingQueued(nodeRedisClusterConnection(client));
  if (isNodeRedisClient(client)) return refusingQueued(nodeRedisClientConnection(client));
  throw new TypeError(
    '@idem/store-redis does not support this client: pass an ioredis Redis or Cluster, or a node-redis ' +
      'client from createClient or createCluster (redis / @redis/client)',
  );
}
