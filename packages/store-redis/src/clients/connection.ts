/** A reply with every bulk string as a Buffer (binary-safe), integers as numbers, nil as null. */
export type Reply = Buffer | number | null | readonly Reply[];

/** A command and its arguments, as sent: `['SET', key, value, 'NX']`. */
export type Command = readonly [string, ...(string | Buffer)[]];

/** Replicas that must acknowledge a write before it counts, through `WAIT count timeoutMs`. */
export interface ReplicaAck {
  readonly count: number;
  readonly timeoutMs: number;
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
}

/** Redis answers `NOSCRIPT …` when its script cache does not hold the SHA (restart, failover, SCRIPT FLUSH). */
export const isNoScript = (error: unknown): boolean =>
  error instanceof Error && error.message.startsWith('NOSCRIPT');

const isQueued = (reply: Reply): boolean =>
  (Buffer.isBuffer(reply) || typeof reply === 'string') && String(reply) === 'QUEUED';

/**
 * A connection that refuses a `QUEUED` answer: the client is inside a MULTI its owner opened on it (ioredis
 * `multi({ pipeline: false })`, a raw `MULTI`), so the command only joined that transaction and its effect comes
 * at the owner's EXEC. No record value is `QUEUED` (each starts with its state), so it is never mistaken for one;
 * the call fails as a fault instead of reading the word as a record or a script's answer.
 */
export function refusingQueued(connection: RedisConnection): RedisConnection {
  return {
    name: connection.name,
    async send(key, command, ack) {
      const answer = await connection.send(key, command, ack);
      if (isQueued(answer.reply)) {
        throw new Error(
          `redis store: ${command[0]} was queued in a MULTI transaction open on this ${connection.name} client; ` +
            'give the store a client that is never left inside MULTI',
        );
      }
      return answer;
    },
    loadScript: (source) => connection.loadScript(source),
  };
}
