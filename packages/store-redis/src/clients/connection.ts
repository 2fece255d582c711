import { createHash } from 'node:crypto';

/** A reply with every bulk string as a Buffer (binary-safe), integers as numbers, nil as null. */
export type Reply = Buffer | number | null | readonly Reply[];

/** A reply as a connection hands it on from `send` (one shared function: nothing made per command). */
export const answer = (reply: unknown): { reply: Reply } => ({ reply: reply as Reply });

/** A command and its arguments, as sent: `['SET', key, value, 'NX']`. */
export type Command = readonly [string, ...(string | Buffer)[]];

/** Replicas that must acknowledge a write before it counts, through `WAIT count timeoutMs`. */
export interface ReplicaAck {
  readonly count: number;
  readonly timeoutMs: number;
}

/** One node that holds keys: a standalone server, or one master of a Cluster. */
export interface KeyNode {
  /** `host:port` of a Cluster master (as the client knows it), `server` for a standalone connection. */
  readonly address: string;
  /** Run one keyless command (`SCAN …`) on this node, with replies as {@link RedisConnection.send} gives them. */
  send(command: Command): Promise<Reply>;
}

/** The nodes to scan for keys, and what they serve. */
export interface KeyNodes {
  /** The server, or every master of the Cluster. */
  readonly nodes: readonly KeyNode[];
  /**
   * A digest of which master serves which slot, as the client knows it now (`server` for a standalone
   * connection): when it changes between two pages, keys may have moved between nodes.
   */
  readonly topology: string;
}

/**
 * What the store needs from a client library, whatever it is: one file per library in this folder adapts it.
 * The store speaks only this; the scripts are the same on every client.
 */
export interface RedisConnection {
  /** The client, as users know it (`ioredis Cluster`, `node-redis` …), for messages. */
  readonly name: string;
  /**
   * Run one command about `key` (`EVALSHA sha 1 key …`, `SET key …`, `GET key`) on the node that owns `key`'s
   * slot, with binary-safe replies. With `ack`, then `WAIT ack.count ack.timeoutMs` on the same connection
   * (the same node), and its answer: how many replicas acknowledged the writes so far.
   */
  send(key: string, command: Command, ack?: ReplicaAck): Promise<{ reply: Reply; acknowledged?: number }>;
  /** `SCRIPT LOAD source` everywhere a script can run: the server, or every master of a Cluster. */
  loadScript(source: string): Promise<void>;
  /**
   * What goes before every key {@link send} sends: the client's `keyPrefix` (ioredis or node-redis; empty
   * without one). SCAN's MATCH gets none of it, and the names SCAN returns hold it.
   */
  readonly keyPrefix: Buffer;
  /** The nodes that hold the keys (see {@link KeyNodes}); a Cluster client that knows no master is a fault. */
  keyNodes(): Promise<KeyNodes>;
}

/**
 * The bytes of a client's `keyPrefix` (`library` names the client in the error): a string as UTF-8, a Buffer as
 * it is, as ioredis and node-redis both write them before a key. A brace in it is refused with a TypeError: it
 * would become every record's Cluster hash tag (all records in one slot), as in the store's own `prefix`.
 */
export function keyPrefixBytes(library: string, keyPrefix: unknown): Buffer {
  if (keyPrefix === undefined || keyPrefix === null) return Buffer.alloc(0);
  const bytes = Buffer.isBuffer(keyPrefix) ? keyPrefix : Buffer.from(String(keyPrefix), 'utf8');
  if (bytes.includes(0x7b) || bytes.includes(0x7d)) {
    const text = Buffer.isBuffer(keyPrefix) ? keyPrefix.toString('latin1') : String(keyPrefix);
    throw new TypeError(
      `@idem/store-redis: the ${library} keyPrefix ${JSON.stringify(text)} holds a brace, which would become ` +
        'the Cluster hash tag of every record (one slot for all of them); use a keyPrefix without "{" or "}"',
    );
  }
  return bytes;
}

/** Redis answers `NOSCRIPT …` when its script cache does not hold the SHA (restart, failover, SCRIPT FLUSH). */
export const isNoScript = (error: unknown): boolean =>
  error instanceof Error && error.message.startsWith('NOSCRIPT');

// Length first: a record's value (a replay's body) is never turned into a string to be compared.
const isQueued = (reply: Reply): boolean =>
  Buffer.isBuffer(reply)
    ? reply.length === 6 && reply.toString('latin1') === 'QUEUED'
    : (reply as unknown) === 'QUEUED';

/**
 * A connection that refuses a `QUEUED` answer: the client is inside a MULTI its owner opened on it (ioredis
 * `multi({ pipeline: false })`, a raw `MULTI`), so the command only joined that transaction and its effect comes
 * at the owner's EXEC. No record value is `QUEUED` (each starts with its state), so it is never mistaken for one;
 * the call fails as a fault instead of reading the word as a record or a script's answer.
 */
export function refusingQueued(connection: RedisConnection): RedisConnection {
  const refused = (command: Command, reply: Reply) => {
    if (!isQueued(reply)) return;
    throw new Error(
      `redis store: ${command[0]} was queued in a MULTI transaction open on this ${connection.name} client; ` +
        'give the store a client that is never left inside MULTI',
    );
  };
  return {
    name: connection.name,
    keyPrefix: connection.keyPrefix,
    send(key, command, ack) {
      return connection.send(key, command, ack).then((answer) => {
        refused(command, answer.reply);
        return answer;
      });
    },
    loadScript: (source) => connection.loadScript(source),
    async keyNodes() {
      const { nodes, topology } = await connection.keyNodes();
      return {
        topology,
        nodes: nodes.map((node) => ({
          address: node.address,
          async send(command) {
            const reply = await node.send(command);
            refused(command, reply);
            return reply;
          },
        })),
      };
    },
  };
}

/** A short digest of each slot's master (`owners[slot]`), in runs, for {@link KeyNodes.topology}. */
export function slotsDigest(owners: (slot: number) => string | undefined): string {
  const runs: string[] = [];
  let previous: string | undefined;
  for (let slot = 0; slot < 16384; slot++) {
    const owner = owners(slot) ?? '';
    if (slot === 0 || owner !== previous) runs.push(`${slot}=${owner}`);
    previous = owner;
  }
  return createHash('sha256').update(runs.join(',')).digest('base64url').slice(0, 12);
}
