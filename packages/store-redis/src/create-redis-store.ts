import {
  type IdempotencyRecord,
  type IdempotencyStore,
  newReservation,
  type ReserveParams,
  type ReserveResult,
} from '@idem/core';
import { isNoScript, type RedisConnection, type ReplicaAck, type Reply } from './clients/connection.js';
import { connectionOf } from './clients/index.js';
import { checkPrefix, DEFAULT_PREFIX, recordKey } from './key-layout.js';
import { checkRef, checkRenew, checkReserve, checkResponse } from './limits.js';
import { toRecord } from './record.js';
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
   * Wait until `count` replicas acknowledged each write (reserve, finalize, release) with `WAIT count
   * timeoutMs`. Fewer acknowledgements within `timeoutMs` make the call fail as a store fault (the coordinator
   * answers 503 with `Retry-After`). Redis replicates asynchronously: without this a failover can lose a
   * reservation or a stored answer. `WAIT` blocks the connection it runs on until it returns.
   * @default none (no WAIT)
   */
  readonly replicas?: ReplicaAck;
}

/** The {@link IdempotencyStore} returned by {@link createRedisStore}. */
export interface RedisStore extends IdempotencyStore {
  /** Which client the store recognised (`ioredis`, `ioredis Cluster`, `node-redis`, `node-redis cluster`). */
  readonly client: string;
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

/**
 * Create a store over a Redis client you own: an ioredis `Redis` or `Cluster`, or a node-redis client from
 * `createClient` or `createCluster`. The store never connects, closes or reconfigures it. Each method is one
 * `EVALSHA` of one Lua script on the record's one key (the script is loaded again on `NOSCRIPT`); records
 * expire in Redis at their `expiresAtMs`, so `purgeExpired` has nothing to do.
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
  /** Run the script; when Redis lost it (restart, failover, SCRIPT FLUSH), load it everywhere and run again. */
  async function run(key: string, args: readonly (string | Buffer)[], ack?: ReplicaAck) {
    try {
      return await connection.evalsha(SCRIPT_SHA, key, args, ack);
    } catch (error) {
      if (!isNoScript(error)) throw error;
      await connection.loadScript(SCRIPT);
      return await connection.evalsha(SCRIPT_SHA, key, args, ack);
    }
  }

  /** A write that needed `replicas` acknowledgements and got fewer is a fault: the write may not survive. */
  function checkAck(operation: string, acknowledged: number | undefined): void {
    if (replicas === undefined || acknowledged === undefined || acknowledged >= replicas.count) return;
    throw new Error(
      `redis store: ${operation} was acknowledged by ${acknowledged} of ${replicas.count} replicas within ` +
        `${replicas.timeoutMs} ms; a failover could lose it`,
    );
  }

  async function fenced(
    operation: 'finalize' | 'release' | 'renew',
    key: string,
    args: readonly (string | Buffer)[],
    ack?: ReplicaAck,
  ): Promise<boolean> {
    const { reply, acknowledged } = await run(key, [operation, ...args], ack);
    if (reply !== 1) return false;
    checkAck(operation, acknowledged);
    return true;
  }

  async function reserve(params: ReserveParams): Promise<ReserveResult> {
    checkReserve(params);
    const key = recordKey(prefix, params.scope, params.key);
    const { reply, acknowledged } = await run(
      key,
      [
        'reserve',
        params.fingerprint,
        params.owner,
        String(params.nowMs),
        String(params.leaseUntilMs),
        String(params.expiresAtMs),
      ],
      replicas,
    );
    const [code, ...fields] = asArray(reply);
    let result: ReserveResult;
    if (code === ReserveCode.Created) {
      result = { outcome: 'reserved', record: newReservation(params), tookOver: false };
    } else {
      const record = toRecord(params, fields) as IdempotencyRecord;
      if (code === ReserveCode.Exists) return { outcome: 'exists', record };
      // AlreadyOurs: the client re-sent this call after a lost reply. A creation stored our nowMs as its
      // createdAtMs; only a takeover in the very millisecond of the creation could be misreported, and only then.
      const tookOver = code === ReserveCode.TookOver || record.createdAtMs !== params.nowMs;
      result = { outcome: 'reserved', record, tookOver };
    }
    try {
      checkAck('reserve', acknowledged);
    } catch (error) {
      // Free the key now rather than after the lease: the caller answers 503 and its retry should not find
      // its own unacknowledged reservation in the way. Best effort; the lease bounds it otherwise.
      await run(key, ['release', params.owner]).catch(() => {});
      throw error;
    }
    return result;
  }

  return {
    client: connection.name,
    limits: { maxBodyBytes },
    reserve,
    async load(ref) {
      checkRef(ref);
      const { reply } = await run(recordKey(prefix, ref.scope, ref.key), ['load']);
      return toRecord(ref, asArray(reply));
    },
    async finalize(params) {
      const headers = checkResponse(params, maxBodyBytes);
      const { status, body, bodyOmitted } = params.response;
      const args = [params.owner, String(status), headers, bodyOmitted === true ? '1' : '0'];
      const withBody =
        body === null ? args : [...args, Buffer.from(body.buffer, body.byteOffset, body.byteLength)];
      return fenced('finalize', recordKey(prefix, params.scope, params.key), withBody, replicas);
    },
    async release(params) {
      checkRef(params);
      return fenced('release', recordKey(prefix, params.scope, params.key), [params.owner], replicas);
    },
    async renewLease(params) {
      checkRef(params);
      checkRenew(params.leaseUntilMs);
      const key = recordKey(prefix, params.scope, params.key);
      return fenced('renew', key, [params.owner, String(params.leaseUntilMs)]);
    },
    async purgeExpired({ beforeMs, limit }) {
      if (!Number.isSafeInteger(limit) || limit < 1) {
        throw new RangeError(`limit must be a positive integer, got ${limit}`);
      }
      if (!Number.isFinite(beforeMs)) throw new RangeError(`beforeMs must be a number, got ${beforeMs}`);
      // Every record carries PEXPIREAT at its expiresAtMs: Redis deletes it itself, and reserve treats one it
      // has not deleted yet as expired. There is nothing to scan for, so nothing is counted.
      return 0;
    },
  };
}
