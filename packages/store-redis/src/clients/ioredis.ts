import { setTimeout as sleep } from 'node:timers/promises';
import type { Cluster, Redis } from 'ioredis';
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

/**
 * An ioredis `Redis` or `Cluster`. ioredis mixes EventEmitter into both classes, which overwrites their
 * `constructor`, so they are recognised by their base class `Commander` and the `isCluster` flag both declare.
 */
export function isIoredis(client: unknown): client is Redis | Cluster {
  return (
    classNames(client).includes('Commander') &&
    typeof (client as { isCluster?: unknown }).isCluster === 'boolean'
  );
}

/** The client options the store reads (they change what goes on the wire). */
interface IoredisOptions {
  readonly keyPrefix?: string | Buffer | undefined;
  readonly stringNumbers?: boolean | undefined;
  readonly scaleReads?: unknown;
}

/**
 * The command methods the store sends, by command name: ioredis's named `…Buffer` methods (binary-safe replies).
 * Never `callBuffer`: its command name is an argument, which ioredis's auto-pipelining drops (`Commander`
 * shifts the name off the arguments, and `executeWithAutoPipelining` puts it back only for `call`), so with
 * `enableAutoPipelining` the key would be sent as the command. Named methods go through auto-pipelining, an
 * explicit pipeline, `keyPrefix` and Cluster routing alike.
 */
const METHODS = {
  SET: 'setBuffer',
  GET: 'getBuffer',
  GETEX: 'getexBuffer',
  EVALSHA: 'evalshaBuffer',
  EVAL: 'evalBuffer',
  DEL: 'del',
  SCAN: 'scanBuffer',
} as const;

/** ioredis Cluster's slot map read again from the cluster (a refresh under way is joined, not repeated). */
const slotsRefreshed = (cluster: Cluster) =>
  new Promise<void>((resolve) => cluster.refreshSlotsCache(() => resolve()));

/** How long a write redirected with MOVED waits for ioredis's slot map to follow, per attempt. */
const FOLLOW_MS = 250;
/** Sends of a write that keeps coming back MOVED before its error is thrown. */
const MOVED_ATTEMPTS = 5;

/** `MOVED <slot> <host:port>`: the slot, and the node that serves it now. */
function movedTo(error: Error): { slot: number; address: string } | undefined {
  const match = /^MOVED (\d+) (\S+)/.exec(error.message);
  return match === null ? undefined : { slot: Number(match[1]), address: match[2] as string };
}

/**
 * Refresh ioredis's slot map until it names `address` as the master of `slot`, for at most {@link FOLLOW_MS}. One
 * refresh is not enough: a refresh asked for while another is under way answers at once with the map as it was
 * (ioredis's `refreshSlotsCache`), and the node a refresh asks may not have heard of a failover yet.
 */
async function slotFollowed(cluster: Cluster, slot: number, address: string): Promise<void> {
  const until = Date.now() + FOLLOW_MS;
  for (;;) {
    await slotsRefreshed(cluster);
    if (cluster.slots[slot]?.[0] === address || Date.now() >= until) return;
    await sleep(20);
  }
}

type Sender = (...args: (string | Buffer)[]) => unknown;

function methodOf(target: object, name: string): Sender {
  const method = METHODS[name as keyof typeof METHODS];
  if (method === undefined) throw new Error(`redis store: no ioredis method for ${name}`);
  return (target as Record<string, Sender>)[method] as Sender;
}

/** The same command sent on its own, never auto-pipelined (ioredis's `createBuiltinCommand`), Buffer replies. */
const direct = (client: Redis | Cluster, name: string): Sender =>
  client.createBuiltinCommand(name.toLowerCase()).buffer as Sender;

/**
 * An auto-pipelined command on a Cluster that was not run: a redirection (MOVED, ASK: the node did not run it and
 * named the one that will), or ioredis's refusal of a whole batch whose slots moved to other nodes between
 * queueing and sending (it rejects the batch before writing anything).
 */
const notRun = (error: unknown): boolean =>
  error instanceof Error &&
  (/^(MOVED|ASK) /.test(error.message) ||
    error.message === 'All keys in the pipeline should belong to the same slots allocation group');

/**
 * Integer replies as numbers: with `stringNumbers`, ioredis hands integers over as strings (bulk strings stay
 * Buffers, so nothing else is a string).
 */
const numbers = (reply: unknown): Reply => {
  if (typeof reply === 'string') return /^-?\d+$/.test(reply) ? Number(reply) : (reply as never);
  if (Array.isArray(reply)) return reply.map(numbers);
  return reply as Reply;
};

/**
 * ioredis, standalone or Cluster, on every option set: named `…Buffer` methods (see {@link METHODS}); on a
 * Cluster ioredis finds the key in the command (by its command table, with the `keyPrefix`), routes it and
 * follows MOVED/ASK itself. With a replica acknowledgement the command and the WAIT go in one explicit pipeline:
 * ioredis sends a pipeline to the node of its keyed command, so the keyless WAIT runs on the connection that
 * made the write.
 */
export function ioredisConnection(client: Redis | Cluster): RedisConnection {
  const options = client.options as IoredisOptions;
  // ioredis prepends its keyPrefix to every key of a named command, KEYS of scripts included (Command#_iterateKeys,
  // by its command table): the store sends keys without it and learns it only to SCAN for and name its records.
  const keyPrefix = keyPrefixBytes('ioredis', options.keyPrefix);
  const toNumbers = options.stringNumbers === true;
  // `scaleReads` other than 'master' sends read-only commands (GET) to replicas, which may lag; GETEX without
  // options reads the same value but is a write command to ioredis, so it goes to the slot's master.
  const replicaReads = client.isCluster && (options.scaleReads ?? 'master') !== 'master';
  const nameOf = (command: Command): string => (replicaReads && command[0] === 'GET' ? 'GETEX' : command[0]);
  const reply = (value: unknown): Reply => (toNumbers ? numbers(value) : (value as Reply));
  // An auto-pipelined batch on a Cluster follows MOVED/ASK only when its other commands were all read-only
  // (ioredis's Pipeline#fillResult), and is refused whole when the slot map changed after it was queued; either
  // comes back as the command's error, during every slot migration.
  const redirectsLeak =
    client.isCluster && (client.options as { enableAutoPipelining?: boolean }).enableAutoPipelining === true;

  const keyNode = (address: string, node: Redis): KeyNode => ({
    address,
    async send([name, ...args]) {
      return reply(await methodOf(node, name).apply(node, args));
    },
  });

  return {
    name: client.isCluster ? 'ioredis Cluster' : 'ioredis',
    keyPrefix,
    async keyNodes() {
      if (!client.isCluster) return { nodes: [keyNode('server', client as Redis)], topology: 'server' };
      const cluster = client as Cluster;
      if (cluster.nodes('master').length === 0) {
        // Not connected yet (lazyConnect, or still connecting): a command waits for the slot map in the
        // client's offline queue (or fails at once without one), as the store's other calls do.
        await cluster.ping();
      }
      const masters = cluster.nodes('master');
      if (masters.length === 0) throw new Error('redis store: the ioredis Cluster knows no master');
      return {
        nodes: masters.map((node) => keyNode(`${node.options.host}:${node.options.port}`, node)),
        topology: slotsDigest((slot) => cluster.slots[slot]?.[0]),
      };
    },
    send(key, command, ack) {
      // The common case without an async frame of its own: one promise from ioredis, one for the answer.
      if (ack === undefined && !redirectsLeak) {
        let pending: Promise<unknown>;
        try {
          pending = methodOf(client, nameOf(command)).apply(client, command.slice(1)) as Promise<unknown>;
        } catch (error) {
          return Promise.reject(error);
        }
        return pending.then(toNumbers ? (value) => ({ reply: numbers(value) }) : answer);
      }
      return sendSlowly(key, command, ack);
    },
    async loadScript(source) {
      const nodes = client.isCluster ? (client as Cluster).nodes('master') : [client as Redis];
      await Promise.all(nodes.map((node) => node.script('LOAD', source)));
    },
  };

  async function sendSlowly(_key: string, command: Command, ack: ReplicaAck | undefined) {
    const name = nameOf(command);
    const args = command.slice(1);
    if (ack === undefined) {
      try {
        return { reply: reply(await methodOf(client, name).apply(client, args)) };
      } catch (error) {
        if (!(redirectsLeak && notRun(error))) throw error;
        // Nothing ran: send it again on its own, where ioredis follows MOVED and ASK itself.
        return { reply: reply(await direct(client, name).apply(client, args)) };
      }
    }
    for (let attempt = 1; ; attempt++) {
      const pipeline = client.pipeline();
      methodOf(pipeline, name).apply(pipeline, args);
      const results = await pipeline.call('WAIT', ack.count, ack.timeoutMs).exec();
      const [[commandError, value] = [], [waitError, acknowledged] = []] = results ?? [];
      if (commandError) {
        // ioredis follows a redirected pipeline only when every command in it was redirected; the WAIT
        // answered, so a write sent to a master that lost its slot (a failover, a moved slot) comes back as
        // MOVED, and ioredis keeps its stale slot map: every later write would be redirected too. The write
        // did not run: learn the new owner and send both again.
        const moved = client.isCluster ? movedTo(commandError) : undefined;
        if (moved === undefined || attempt === MOVED_ATTEMPTS) throw commandError;
        await slotFollowed(client as Cluster, moved.slot, moved.address);
        continue;
      }
      if (waitError) throw waitError;
      return { reply: reply(value), acknowledged: Number(acknowledged) };
    }
  }
}
