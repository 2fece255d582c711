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
