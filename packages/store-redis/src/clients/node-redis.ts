import { classNames } from './class-chain.js';

import type { Command, RedisConnection, Reply } from './connection.js';

/** The part of node-redis's `RedisClient` the store uses (its generics make the real type unwieldy here). */
interface NodeRedisClient {
  sendCommand(args: Command, options?: object): Promise<unknown>;
}
/** The part of node-redis's `RedisCluster` the store uses. */
interface NodeRedisCluster {
  sendCommand(firstKey: string, isReadonly: boolean, args: Command, options?: object): Promise<unknown>;
  readonly masters: readonly object[];
  nodeClient(node: object): Promise<NodeRedisClient> | NodeRedisClient;
}

// RESP_TYPES.BLOB_STRING ('$'): bulk strings as Buffers, so that bodies and fields stay bytes. Written out
// rather than imported so that the store never loads `redis` itself (an optional peer).
const BUFFERS = { typeMapping: { 36: Buffer } };

/** node-redis `RedisClient` (`createClient`), recognised by its class. */
export const isNodeRedisClient = (client: unknown): client is NodeRedisClient =>
  classNames(client).includes('RedisClient');

/** node-redis `RedisCluster` (`createCluster`), recognised by its class. */
export const isNodeRedisCluster = (client: unknown): client is NodeRedisCluster =>
  classNames(client).includes('RedisCluster');

const isConnectionLost = (error: unknown): boolean =>
  error instanceof Error && /^Socket closed unexpectedly|ECONNRESET/.test(error.message);

const wait = (count: number, timeoutMs: number): Command => ['WAIT', String(count), String(timeoutMs)];

/** node-redis `createClient`: one connection, commands in order, so the WAIT follows the write on it. */
export function nodeRedisClientConnection(client: NodeRedisClient): RedisConnection {
  return {
    name: 'node-redis',
    async send(_key, command, ack) {
      const reply = (await client.sendCommand(command, BUFFERS)) as Reply;
      if (ack === undefined) return { reply };
      return { reply, acknowledged: Number(await client.sendCommand(wait(ack.count, ack.timeoutMs))) };
    },
    async loadScript(source) {
      await client.sendCommand(['SCRIPT', 'LOAD', source]);
    },
  };
}

/**
 * node-redis `createCluster`: every command is routed by the key given as `firstKey` (MOVED/ASK followed by
 * the library), so the WAIT, routed by the record's key, runs on the master that made the write.
 */
export function nodeRedisClusterConnection(cluster: NodeRedisCluster): RedisConnection {
  return {
    name: 'node-redis cluster',
    async send(key, command, ack) {
      if (ack === undefined)
        return { reply: (await cluster.sendCommand(key, false, command, BUFFERS)) as Reply };
      for (let attempt = 1; ; attempt++) {
        try {
          const reply = (await cluster.sendCommand(key, false, command, BUFFERS)) as Reply;
          const acknowledged = await cluster.sendCommand(key, false, wait(ack.count, ack.timeoutMs));
          return { reply, acknowledged: Number(acknowledged) };
        } catch (error) {
          // A master that turns replica (a failover) closes the connection of a client blocked in WAIT, and with
          // it every command queued behind the WAIT, run or not; node-redis, unlike ioredis, does not send them
          // again. Each store write may be sent twice (a re-sent reserve finds its own owner, a fenced write that
          // ran finds nothing to do), so it goes once more, to the slot's owner now: otherwise a finalize lost
          // this way leaves the key in flight, to run again after its lease.
          if (attempt === 2 || !isConnectionLost(error)) throw error;
        }
      }
    },
    async loadScript(source) {
      await Promise.all(
        cluster.masters.map(async (master) => {
          const node = await cluster.nodeClient(master);
          await node.sendCommand(['SCRIPT', 'LOAD', source]);
        }),
      );
    },
  };
}
