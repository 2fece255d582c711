import { classNames } from './class-chain.js';

import {
  type Command,
  type KeyNode,
  type RedisConnection,
  type ReplicaAck,
  type Reply,
  slotsDigest,
} from './connection.js';

/** The part of node-redis's `RedisClient` the store uses (its generics make the real type unwieldy here). */
interface NodeRedisClient {
  sendCommand(args: Command, options?: object): Promise<unknown>;
}
/** The part of node-redis's `RedisCluster` the store uses. */
interface NodeRedisCluster {
  sendCommand(firstKey: string, isReadonly: boolean, args: Command, options?: object): Promise<unknown>;
  readonly masters: readonly { readonly address: string }[];
  /** Each slot's shard, by slot number (a slot no master serves is empty). */
  readonly slots: readonly ({ readonly master: { readonly address: string } } | undefined)[];
  nodeClient(node: object): Promise<NodeRedisClient> | NodeRedisClient;
  /** The client of the master of `key`'s slot (node-redis 6.3 and later). */
  getNodeClientForKey?(key: string, isReadonly?: boolean): Promise<NodeRedisClient> | NodeRedisClient;
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
  const server: KeyNode = {
    address: 'server',
    send: async (command) => (await client.sendCommand(command, BUFFERS)) as Reply,
  };
  return {
    name: 'node-redis',
    // node-redis's own keyPrefix applies to its typed commands only: the store's raw sendCommand bypasses it.
    keyPrefix: Buffer.alloc(0),
    keyNodes: async () => ({ nodes: [server], topology: 'server' }),
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
 * the library); with a replica acknowledgement, the write and its WAIT go together to the client of the slot's
 * master (see `writeAndWait`).
 */
export function nodeRedisClusterConnection(cluster: NodeRedisCluster): RedisConnection {
  /**
   * The write and its WAIT on one node's connection, in order: WAIT counts the replicas that have what its own
   * connection wrote. Routed one by one, a write redirected by MOVED (or sent to a restarted master that had
   * not learnt it was replaced) and its WAIT could run on two nodes, and the WAIT acknowledge the other node's
   * writes: answers acknowledged that way were lost in a failover test. A MOVED reply means the write did not
   * run; a keyed read through the cluster then makes node-redis learn the new owner, and both go again.
   */
  async function writeAndWait(key: string, command: Command, ack: ReplicaAck) {
    const getNode = cluster.getNodeClientForKey?.bind(cluster);
    if (getNode === undefined) {
      const reply = (await cluster.sendCommand(key, false, command, BUFFERS)) as Reply;
      const acknowledged = await cluster.sendCommand(key, false, wait(ack.count, ack.timeoutMs));
      return { reply, acknowledged: Number(acknowledged) };
    }
    for (let attempt = 1; ; attempt++) {
      const node = await getNode(key, false);
      const [written, acknowledged] = await Promise.allSettled([
        node.sendCommand(command, BUFFERS),
        node.sendCommand(wait(ack.count, ack.timeoutMs)),
      ]);
      if (written.status === 'rejected') {
        const error = written.reason;
        if (attempt === 3 || !(error instanceof Error && error.message.startsWith('MOVED '))) throw error;
        await cluster.sendCommand(key, false, ['EXISTS', key]);
        continue;
      }
      if (acknowledged.status === 'rejected') throw acknowledged.reason;
      return { reply: written.value as Reply, acknowledged: Number(acknowledged.value) };
    }
  }

  return {
    name: 'node-redis cluster',
    keyPrefix: Buffer.alloc(0),
    async keyNodes() {
      const { masters } = cluster;
      if (masters.length === 0) throw new Error('redis store: the node-redis cluster knows no master');
      return {
        nodes: masters.map(
          (master): KeyNode => ({
            address: master.address,
            async send(command) {
              const node = await cluster.nodeClient(master);
              return (await node.sendCommand(command, BUFFERS)) as Reply;
            },
          }),
        ),
        topology: slotsDigest((slot) => cluster.slots[slot]?.master.address),
      };
    },
    async send(key, command, ack) {
      if (ack === undefined)
        return { reply: (await cluster.sendCommand(key, false, command, BUFFERS)) as Reply };
      for (let attempt = 1; ; attempt++) {
        try {
          return await writeAndWait(key, command, ack);
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
