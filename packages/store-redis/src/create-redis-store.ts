import {
  decideReservation,
  type IdempotencyStore,
  type ListParams,
  newReservation,
  type RecordPage,
  type RecordRef,
  type ReserveParams,
  type ReserveResult,
  type StatsParams,
  type StoreStats,
} from '@idem/core';
import {
  type Command,
  isNoScript,
  type RedisConnection,
  type ReplicaAck,
  type Reply,
} from './clients/connection.js';
import { connectionOf } from './clients/index.js';
import { inspection } from './inspection.js';
import { checkPrefix, DEFAULT_PREFIX, recordKey } from './key-layout.js';
import { checkRef, checkReserve, checkResponse, checkTime } from './limits.js';
import { decodeRecord, digits16, encodeCompletion, encodeInFlight, ownerHead } from './record.js';
import { ReserveCode, SCRIPT, SCRIPT_SHA } from './script.js';

/** Options of {@link createRedisStore}. */
export interface RedisStoreOptions {
  /**
   * Prepended to every record key (`<prefix>{<scope>:<key>}`); no braces. Give each application its own.
   * @default 'idem:'
   */
  readonly prefix?: string;
  /**
   * The largest response body stored, in bytes; declared as the store's `limits.maxBodyBytes`, so the
   * coordinator stores larger bodies as omitted. A larger one is refused with `IdemStoreLimitError`.
   * @default 8 MiB
   */
  readonly maxBodyBytes?: number;
  /**
   * Wait until `count` replicas acknowledged each write (reserve, finalize, release, forget) with `WAIT count
   * timeoutMs`. Fewer acknowledgements within `timeoutMs` make the call fail as a store fault (the coordinator
   * answers 503 with `Retry-After`). Redis replicates asynchronously: without this a failover can lose a
   * reservation or a stored answer. `WAIT` blocks the connection it runs on until it returns.
   * @default none (no WAIT)
   */
  readonly replicas?: ReplicaAck;
}

/** The {@link IdempotencyStore} returned by {@link createRedisStore}, with every optional inspection method. */
export interface RedisStore extends IdempotencyStore {
  /** Which client the store recognised (`ioredis`, `ioredis Cluster`, `node-redis`, `node-redis cluster`). */
  readonly client: string;
  /** One `DEL` of the record's key (with its `WAIT` when `replicas` is set). */
  forget(params: RecordRef): Promise<boolean>;
  /**
   * A page of the records under the prefix, by `SCAN` of the server or of every master of a Cluster, one after
   * another: a full pass costs O(keys in the database). An error says to list again when the Cluster's masters
   * or slots changed between pages.
   */
  list(params: ListParams): Promise<RecordPage>;
  /** Counts by `SCAN` of every key under the prefix, reading each record's head: O(records). */
  stats(params: StatsParams): Promise<StoreStats>;
}

const DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024;

function checkOptions(options: RedisStoreOptions): void {
  const { maxBodyBytes, replicas } = options;
  if (maxBodyBytes !== undefined && !(Number.isSafeInteger(maxBodyBytes) && maxBodyBytes >= 0)) {
    throw new RangeError(`maxBodyBytes must be a non-negative integer, got ${maxBodyBytes}`);
  }
  if (replicas !== undefined) {
    const { count, timeoutMs } = replicas;
    if (!(Number.isSafeInteger(count) && count >= 0) || !(Number.isSafeInteger(timeoutMs) && timeoutMs > 0)) {
      throw new RangeError(
        `replicas needs an integer count >= 0 and timeoutMs > 0 (0 would wait forever), got ${JSON.stringify(replicas)}`,
      );
    }
  }
}

const asArray = (reply: Reply): readonly Reply[] => {
  if (!Array.isArray(reply)) throw new Error(`unexpected reply from the idem script: ${String(reply)}`);
  return reply;
};
const asValue = (reply: Reply | undefined): Buffer => {
  if (!Buffer.isBuffer(reply)) throw new Error(`unexpected reply for a record: ${String(reply)}`);
  return reply;
};

/**
 * Create a store over a Redis client you own: an ioredis `Redis` or `Cluster`, or a node-redis client from
 * `createClient` or `createCluster` (Redis 7.0 or later). The store never connects, closes or reconfigures
 * it. Each method is one atomic step on the record's one key: a `SET … NX PXAT … GET` that creates a fresh
 * record or returns the current one, or an `EVALSHA` of one Lua script where a decision must be taken and written
 * at once (the script is loaded again on `NOSCRIPT`). Records expire in Redis at their `expiresAtMs`, so
 * `purgeExpired` has nothing to do.
 *
 * For operators: `forget` is one `DEL`; `list` and `stats` SCAN the keys under the prefix, on the server or on
 * every master of a Cluster, so a full pass costs O(keys in the database), and `stats` reads every record. A key
 * under the prefix shaped like a record's (`<prefix>{…}`) that is not one fails them, named in the error.
 *
 * @param client An ioredis or node-redis client (connected, or connecting: it is the client's queue that waits).
 * @param options See {@link RedisStoreOptions}.
 * @throws TypeError for any other client, or a prefix with a brace.
 *
 * @example
 * import { Redis } from 'ioredis';
 * const store = createRedisStore(new Redis(process.env.REDIS_URL), { prefix: 'orders:idem:' });
 * const idem = createIdempotency({ store });
 */
export function createRedisStore(client: object, options: RedisStoreOptions = {}): RedisStore {
  checkOptions(options);
  const connection = connectionOf(client);
  const prefix = checkPrefix(options.prefix ?? DEFAULT_PREFIX);
  const maxBodyBytes = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
  return build(connection, prefix, maxBodyBytes, options.replicas);
}

function build(
  connection: RedisConnection,
  prefix: string,
  maxBodyBytes: number,
  replicas: ReplicaAck | undefined,
): RedisStore {
  /**
   * Run the script. When Redis lost it (restart, failover, SCRIPT FLUSH), load it on every node and run it
   * again; if it is lost once more in between (another flush, a new master), send it whole with EVAL, which
   * needs no cache.
   */
  async function script(key: string, args: readonly (string | Buffer)[], ack?: ReplicaAck) {
    // Sent as it is (the connection may hand this very array to the client): never changed once built.
    const command: Command = ['EVALSHA', SCRIPT_SHA, '1', key, ...args];
    try {
      return await connection.send(key, command, ack);
    } catch (error) {
      if (!isNoScript(error)) throw error;
    }
    await connection.loadScript(SCRIPT);
    try {
      return await connection.send(key, command, ack);
    } catch (again) {
      if (!isNoScript(again)) throw again;
    }
    return await connection.send(key, ['EVAL', SCRIPT, '1', key, ...args], ack);
  }

  /** A write that needed `replicas` acknowledgements and got fewer is a fault: the write may not survive. */
  function checkAck(operation: string, acknowledged: number | undefined): void {
    if (replicas === undefined || acknowledged === undefined || acknowledged >= replicas.count) return;
    throw new Error(
      `redis store: ${operation} was acknowledged by ${acknowledged} of ${replicas.count} replicas within ` +
        `${replicas.timeoutMs} ms; a failover could lose it`,
    );
  }

  /** A fenced operation: `args` start with the operation and the caller's owner head. */
  async function fenced(key: string, args: readonly (string | Buffer)[], ack?: ReplicaAck): Promise<boolean> {
    const { reply, acknowledged } = await script(key, args, ack);
    const operation = args[0] as string;
    if (reply !== 1) return false;
    checkAck(operation, acknowledged);
    return true;
  }

  /** Decide and write in the script: the record found was expired, or its lease lapsed, when we looked. */
  async function reserveInScript(params: ReserveParams, key: string, value: string) {
    const { reply, acknowledged } = await script(
      key,
      [
        'reserve',
        value,
        params.fingerprint,
        ownerHead(params.owner),
        String(params.nowMs),
        digits16(params.leaseUntilMs),
        String(params.expiresAtMs),
      ],
      replicas,
    );
    const [code, current] = asArray(reply);
    if (code === ReserveCode.Created) {
      return {
        result: { outcome: 'reserved', record: newReservation(params), tookOver: false } as const,
        acknowledged,
      };
    }
    const record = decodeRecord(params, asValue(current));
    if (code === ReserveCode.Exists) return { result: { outcome: 'exists', record } as const };
    return { result: ownReservation(params, record, code === ReserveCode.TookOver), acknowledged };
  }

  /**
   * The record holds our owner token: we took it over, or this very call already ran and the client re-sent it
   * after a lost reply (ioredis does by default). A creation stored our nowMs as its createdAtMs; only a
   * takeover in the very millisecond of the creation could then be misreported.
   */
  const ownReservation = (
    params: ReserveParams,
    record: ReturnType<typeof decodeRecord>,
    tookOver: boolean,
  ): ReserveResult => ({
    outcome: 'reserved',
    record,
    tookOver: tookOver || record.createdAtMs !== params.nowMs,
  });

  async function reserve(params: ReserveParams): Promise<ReserveResult> {
    checkReserve(params);
    const key = recordKey(prefix, params.scope, params.key);
    const value = encodeInFlight(params);
    // One command creates a fresh record, or returns the current one unchanged: a replay or a busy key is
    // answered in this one round trip. Only a record that may be replaced or taken over goes to the script,
    // which decides again from what is there then.
    const fast = await connection.send(
      key,
      ['SET', key, value, 'NX', 'PXAT', String(params.expiresAtMs), 'GET'],
      replicas,
    );
    let outcome: { result: ReserveResult; acknowledged?: number | undefined };
    if (fast.reply === null) {
      outcome = {
        result: { outcome: 'reserved', record: newReservation(params), tookOver: false },
        acknowledged: fast.acknowledged,
      };
    } else {
      const existing = decodeRecord(params, asValue(fast.reply));
      if (existing.response === null && existing.owner === params.owner) {
        return ownReservation(params, existing, false);
      }
      if (decideReservation(existing, params) === 'keep') return { outcome: 'exists', record: existing };
      outcome = await reserveInScript(params, key, value);
    }
    if (outcome.result.outcome === 'reserved') {
      try {
        checkAck('reserve', outcome.acknowledged);
      } catch (error) {
        // Free the key now rather than after the lease: the caller answers 503 and its retry should not find
        // its own unacknowledged reservation in the way. Best effort; the lease bounds it otherwise.
        await script(key, ['release', ownerHead(params.owner)]).catch(() => {});
        throw error;
      }
    }
    return outcome.result;
  }

  const { list, stats } = inspection(connection, prefix, async (key) => (await script(key, ['head'])).reply);

  return {
    client: connection.name,
    limits: { maxBodyBytes },
    reserve,
    async load(ref) {
      checkRef(ref);
      const key = recordKey(prefix, ref.scope, ref.key);
      const { reply } = await connection.send(key, ['GET', key]);
      return reply === null ? undefined : decodeRecord(ref, asValue(reply));
    },
    // Not async functions around `fenced`: an async function that returns a promise adds a promise and two turns
    // of the microtask queue to every call. A bad argument still rejects, as it would in one.
    finalize(params) {
      try {
        const { headers, headerBytes } = checkResponse(params, maxBodyBytes);
        const key = recordKey(prefix, params.scope, params.key);
        const [completion, body] = encodeCompletion(params.response, headers, headerBytes);
        const head = ownerHead(params.owner);
        return fenced(
          key,
          body === undefined ? ['finalize', head, completion] : ['finalize', head, completion, body],
          replicas,
        );
      } catch (error) {
        return Promise.reject(error);
      }
    },
    release(params) {
      try {
        checkRef(params);
        const key = recordKey(prefix, params.scope, params.key);
        return fenced(key, ['release', ownerHead(params.owner)], replicas);
      } catch (error) {
        return Promise.reject(error);
      }
    },
    renewLease(params) {
      try {
        checkRef(params);
        checkTime('leaseUntilMs', params.leaseUntilMs);
        const key = recordKey(prefix, params.scope, params.key);
        return fenced(key, ['renew', ownerHead(params.owner), digits16(params.leaseUntilMs)]);
      } catch (error) {
        return Promise.reject(error);
      }
    },
    async purgeExpired({ beforeMs, limit }) {
      if (!Number.isSafeInteger(limit) || limit < 1) {
        throw new RangeError(`limit must be a positive integer, got ${limit}`);
      }
      if (!Number.isFinite(beforeMs)) throw new RangeError(`beforeMs must be a number, got ${beforeMs}`);
      // Every record is written with PXAT at its expiresAtMs: Redis deletes it itself, and reserve treats one it
      // has not deleted yet as expired. There is nothing to scan for, so nothing is counted.
      return 0;
    },
    async forget(ref) {
      checkRef(ref);
      const key = recordKey(prefix, ref.scope, ref.key);
      const { reply, acknowledged } = await connection.send(key, ['DEL', key], replicas);
      if (reply !== 1) return false;
      checkAck('forget', acknowledged);
      return true;
    },
    list,
    stats,
  };
}
