import { classNames } from './class-chain.js';

import {
  answer,
  type Command,
  type KeyNode,
  keyPrefixBytes,
  type RedisConnection,
  type ReplicaAck,
  type Reply,
  slotsDigest,
} from './connection.js';

/** node-redis's `keyPrefix` option (6.3 and later), a string or a Buffer. */
interface KeyPrefixOption {
  readonly keyPrefix?: unknown;
}
/** The part of node-redis's `RedisClient` the store uses (its generics make the real type unwieldy here). */
interface NodeRedisClient {
  sendCommand(args: Command, options?: object): Promise<unknown>;
  readonly options?: KeyPrefixOption;
}
/** The part of node-redis's `RedisCluster` the store uses. */
interface NodeRedisCluster {
  sendCommand(firstKey: Key, isReadonly: boolean, args: Command, options?: object): Promise<unknown>;
  /** The cluster's own options: its `keyPrefix` is one of them (not a node's, in `defaults`). */
  readonly _options?: KeyPrefixOption;
  readonly masters: readonly { readonly address: string }[];
  /** Each slot's shard, by slot number (a slot no master serves is empty). */
  readonly slots: readonly ({ readonly master: { readonly address: string } } | undefined)[];
  nodeClient(node: object): Promise<NodeRedisClient> | NodeRedisClient;
  /** The client of the master of `key`'s slot (node-redis 6.3 and later). */
  getNodeClientForKey?(key: Key, isReadonly?: boolean): Promise<NodeRedisClient> | NodeRedisClient;
}

/** A key as sent: the store's string, or the bytes of the client's keyPrefix and that string. */
type Key = string | Buffer;

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

const FIRST_ARGUMENT: readonly number[] = [1];
const ONE_SCRIPT_KEY: readonly number[] = [3];

/** Where the keys are in each keyed command the store sends. */
function keyPositions(command: Command): readonly number[] {
  const [name] = command;
  switch (name) {
    case 'SET':
    case 'GET':
    case 'DEL':
      return FIRST_ARGUMENT;
    case 'EVALSHA':
    case 'EVAL':
      // The store's scripts take one key; any other count is read from the command.
      return command[2] === '1'
        ? ONE_SCRIPT_KEY
        : Array.from({ length: Number(command[2]) }, (_, i) => 3 + i);
    default:
      throw new Error(`redis store: no key position known for ${name} on node-redis`);
  }
}

/**
 * The client's `keyPrefix`, put before the keys of each command by the connection itself: node-redis applies it
 * to its typed commands only, never to `sendCommand`, which the store uses. Without this the records of two
 * applications that share a Redis and are kept apart by their `keyPrefix` would be the same keys, and one would
 * replay the other's answers. ioredis prepends its own by its command table; here the table is
 * {@link keyPositions}, and an unknown command is refused with or without a prefix, never sent unprefixed. Like
 * both libraries, SCAN's MATCH gets no prefix (the inspection puts {@link RedisConnection.keyPrefix} in it).
 */
function keyPrefixer(options: KeyPrefixOption | undefined) {
  const keyPrefix = keyPrefixBytes('node-redis', options?.keyPrefix);
  const key = (name: string): Key =>
    keyPrefix.length === 0 ? name : Buffer.concat([keyPrefix, Buffer.from(name, 'utf8')]);
  function command(sent: Command): Command {
    const positions = keyPositions(sent);
    for (const at of positions) {
      if (typeof sent[at] !== 'string') throw new Error(`redis store: ${sent[0]} without its key`);
    }
    // Without a keyPrefix the command goes as it is: a copy per command was the store's largest own cost here.
    if (keyPrefix.length === 0) return sent;
    const out: (string | Buffer)[] = [...sent];
    for (const at of positions) out[at] = key(out[at] as string);
    return out as unknown as Command;
  }
  return { keyPrefix, key, command };
}

/** node-redis `createClient`: one connection, commands in order, so the WAIT follows the write on it. */
export function nodeRedisClientConnection(client: NodeRedisClient): RedisConnection {
  const prefixed = keyPrefixer(client.options);
  const server: KeyNode = {
    address: 'server',
    send: async (command) => (await client.sendCommand(command, BUFFERS)) as Reply,
  };
  return {
    name: 'node-redis',
    keyPrefix: prefixed.keyPrefix,
    keyNodes: async () => ({ nodes: [server], topology: 'server' }),
    send(_key, command, ack) {
      let sent: Promise<unknown>;
      try {
        sent = client.sendCommand(prefixed.command(command), BUFFERS);
      } catch (error) {
        return Promise.reject(error);
      }
      // One promise for a command without a WAIT (nearly every one): no async function around it.
      if (ack === undefined) return sent.then(answer);
      return sent.then(async (reply) => ({
        reply: reply as Reply,
        acknowledged: Number(await client.sendCommand(wait(ack.count, ack.timeoutMs))),
      }));
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
  const prefixed = keyPrefixer(cluster._options);
  /**
   * The write and its WAIT on one node's connection, in order: WAIT counts the replicas that have what its own
   * connection wrote. Routed one by one, a write redirected by MOVED (or sent to a restarted master that had
   * not learnt it was replaced) and its WAIT could run on two nodes, and the WAIT acknowledge the other node's
   * writes: answers acknowledged that way were lost in a failover test. A MOVED reply means the write did not
   * run; a keyed read through the cluster then makes node-redis learn the new owner, and both go again.
   */
  async function writeAndWait(key: Key, command: Command, ack: ReplicaAck) {
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
    keyPrefix: prefixed.keyPrefix,
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
    send(name, sent, ack) {
      try {
        // Routed by the key as sent: the slot is the store's hash tag's either way (a keyPrefix holds no brace).
        const key = prefixed.key(name);
        const command = prefixed.command(sent);
        if (ack === undefined) return cluster.sendCommand(key, false, command, BUFFERS).then(answer);
        return sendAcknowledged(key, command, ack);
      } catch (error) {
        return Promise.reject(error);
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

  /** A write and its WAIT ({@link writeAndWait}), once more after a connection lost to a failover. */
  async function sendAcknowledged(key: Key, command: Command, ack: ReplicaAck) {
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
  }
}
