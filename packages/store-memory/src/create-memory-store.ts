import {
  type Clock,
  checkListParams,
  checkStatsParams,
  decideReservation,
  decodeRecordCursor,
  encodeRecordCursor,
  type FinalizeParams,
  hasListeners,
  type IdempotencyEventListener,
  type IdempotencyRecord,
  type IdempotencyStore,
  IdemStoreLimitError,
  type ListParams,
  listedBy,
  listedRecord,
  newReservation,
  type OwnedRecordRef,
  type RecordPage,
  type RecordRef,
  type RenewLeaseParams,
  type ReserveParams,
  type ReserveResult,
  type StatsParams,
  StatsTally,
  type StoreStats,
  safeListener,
  systemClock,
} from '@idem/core';
import { LRUCache } from 'lru-cache';

export interface MemoryStoreOptions {
  /** The most completed records kept; the least recently used go first. @default 10_000 */
  readonly maxEntries?: number;
  /**
   * Optional bound on the bytes of stored bodies (plus a small per-record overhead). The store declares the
   * largest body that fits as its `limits.maxBodyBytes`, so the coordinator stores larger ones as omitted.
   */
  readonly maxSizeBytes?: number;
  /** How often expired records are swept, in ms; `false` leaves it to `purgeExpired` callers. @default 60_000 */
  readonly sweepIntervalMs?: number | false;
  /** The clock of the sweep. @default the system clock */
  readonly clock?: Clock;
  /**
   * Receives an `evicted` event for each completed record dropped for capacity (the same events as the
   * coordinator's `onEvent`: pass one listener to both).
   */
  readonly onEvent?: IdempotencyEventListener;
}

/**
 * An {@link IdempotencyStore} held in this process's memory, with `close()` to stop its sweep timer. The calls
 * of a request (`reserve`, `load`, `finalize`, `release`, `renewLease`) answer synchronously with their value
 * (`await` takes it as it takes a promise); only a finalize refused for `maxSizeBytes` answers with a rejected
 * promise, as it always did.
 */
export interface MemoryStore extends IdempotencyStore {
  /** Records currently held: in flight and completed. */
  readonly size: number;
  reserve(params: ReserveParams): ReserveResult;
  load(params: RecordRef): IdempotencyRecord | undefined;
  finalize(params: FinalizeParams): boolean | Promise<never>;
  release(params: OwnedRecordRef): boolean;
  renewLease(params: RenewLeaseParams): boolean;
  /** Delete the record of (scope, key), in flight or completed; `true` when there was one. */
  forget(params: RecordRef): Promise<boolean>;
  /**
   * A page of records in (scope, key) order (by UTF-16 code units). The cursor is the last (scope, key) listed,
   * so that paging goes on after it whatever was added or removed meanwhile: each record present throughout is
   * listed exactly once. A page costs a pass over every record held (it is for inspection).
   */
  list(params: ListParams): Promise<RecordPage>;
  /** Counts by state at `nowMs`, in one pass over every record held. */
  stats(params: StatsParams): Promise<StoreStats>;
  close(): Promise<void>;
}

const RECORD_OVERHEAD_BYTES = 256;

/**
 * The id of (scope, key), unambiguous whatever characters either holds: the key itself where that cannot be
 * read as anything else (no scope, and no `:` in the key, as in every UUID: no string is built per call), else
 * the scope's length, `:`, the scope and the key (always with a `:`).
 */
export const idOf = (scope: string, key: string): string =>
  scope === '' && key.indexOf(':') === -1 ? key : `${scope.length}:${scope}${key}`;

/** (scope, key) order, by UTF-16 code units: a total order, the one `list` pages in. */
const compareRefs = (a: RecordRef, b: RecordRef): number =>
  a.scope < b.scope ? -1 : a.scope > b.scope ? 1 : a.key < b.key ? -1 : a.key > b.key ? 1 : 0;

/**
 * `record` held by `owner` until `leaseUntilMs`, every field written out: on Node 20, fields set after a spread
 * (`{ ...record, leaseUntilMs }`) cost about a microsecond each and leave old-generation garbage.
 */
const leased = (record: IdempotencyRecord, owner: string, leaseUntilMs: number): IdempotencyRecord => ({
  scope: record.scope,
  key: record.key,
  fingerprint: record.fingerprint,
  owner,
  leaseUntilMs,
  response: record.response,
  createdAtMs: record.createdAtMs,
  expiresAtMs: record.expiresAtMs,
});

/**
 * Create a store that keeps records in this process. It is atomic within one process only: use it for a single
 * node, development and tests, never for several processes behind one load balancer.
 *
 * In-flight reservations are never evicted (that would let a duplicate run while the first still executes).
 * Completed records are bounded by `maxEntries` (least recently used first); an evicted record is forgotten
 * early, so a retry of it would execute again.
 */
export function createMemoryStore(options: MemoryStoreOptions = {}): MemoryStore {
  const clock = options.clock ?? systemClock;
  const emit = safeListener(options.onEvent);
  const listening = hasListeners(emit);
  const inFlight = new Map<string, IdempotencyRecord>();
  const maxSizeBytes = options.maxSizeBytes;
  if (maxSizeBytes !== undefined && !(maxSizeBytes > RECORD_OVERHEAD_BYTES)) {
    throw new RangeError(`maxSizeBytes must be more than ${RECORD_OVERHEAD_BYTES}, got ${maxSizeBytes}`);
  }
  /** What a record holds: its body and its headers (names and values), plus a fixed overhead. */
  const sizeOf = (record: IdempotencyRecord): number => {
    let size = RECORD_OVERHEAD_BYTES + (record.response?.body?.byteLength ?? 0);
    for (const [name, value] of Object.entries(record.response?.headers ?? {}))
      size += name.length + value.length;
    return size;
  };
  const completed = new LRUCache<string, IdempotencyRecord>({
    max: options.maxEntries ?? 10_000,
    ...(maxSizeBytes === undefined ? {} : { maxSize: maxSizeBytes, sizeCalculation: sizeOf }),
    dispose: (record, _id, reason) => {
      if (reason === 'evict' && listening) {
        emit({ type: 'evicted', scope: record.scope, key: record.key, reason: 'capacity' });
      }
    },
  });

  const purgeExpired = ({ beforeMs, limit }: { beforeMs: number; limit: number }): number => {
    let count = 0;
    for (const [id, record] of inFlight) {
      if (count >= limit) return count;
      if (record.expiresAtMs < beforeMs) {
        inFlight.delete(id);
        count++;
      }
    }
    const expired: string[] = [];
    for (const [id, record] of completed.entries()) {
      if (count + expired.length >= limit) break;
      if (record.expiresAtMs < beforeMs) expired.push(id);
    }
    for (const id of expired) completed.delete(id);
    return count + expired.length;
  };

  const sweepIntervalMs = options.sweepIntervalMs ?? 60_000;
  const sweep =
    sweepIntervalMs === false
      ? undefined
      : setInterval(
          () => purgeExpired({ beforeMs: clock.nowMs(), limit: Number.POSITIVE_INFINITY }),
          sweepIntervalMs,
        );
  sweep?.unref();

  const reserve = (params: ReserveParams): ReserveResult => {
    const id = idOf(params.scope, params.key);
    const running = inFlight.get(id);
    const existing = running ?? completed.get(id);
    const decision = decideReservation(existing, params);
    if (existing !== undefined && decision === 'keep') return { outcome: 'exists', record: existing };
    const record =
      existing !== undefined && decision === 'take-over'
        ? leased(existing, params.owner, params.leaseUntilMs)
        : newReservation(params);
    if (existing !== undefined && running === undefined) completed.delete(id); // an expired one, replaced
    inFlight.set(id, record);
    return { outcome: 'reserved', record, tookOver: decision === 'take-over' };
  };

  /** Every record held, in flight and completed (the two never hold the same id), without touching recency. */
  function* everyRecord(): Generator<IdempotencyRecord> {
    yield* inFlight.values();
    yield* completed.values();
  }

  const list = (params: ListParams): RecordPage => {
    checkListParams(params);
    const after = params.cursor === undefined ? undefined : decodeRecordCursor(params.cursor);
    const listed: IdempotencyRecord[] = [];
    for (const record of everyRecord()) {
      if (listedBy(params, record) && (after === undefined || compareRefs(record, after) > 0))
        listed.push(record);
    }
    listed.sort(compareRefs);
    const page = listed.slice(0, params.limit);
    const last = page.at(-1);
    return {
      records: page.map((record) => listedRecord(record, params.bodies === true)),
      cursor: listed.length > page.length && last !== undefined ? encodeRecordCursor(last) : null,
    };
  };

  /** The in-flight record of `id` if `owner` holds it. */
  const owned = (id: string, owner: string): IdempotencyRecord | undefined => {
    const record = inFlight.get(id);
    return record !== undefined && record.owner === owner ? record : undefined;
  };

  // Every method runs synchronously (the calls of a request answer so; the rest inside an async function):
  // nothing interleaves between its read and its write, which is what makes reserve atomic within this process.
  return {
    limits: maxSizeBytes === undefined ? {} : { maxBodyBytes: maxSizeBytes - RECORD_OVERHEAD_BYTES },
    get size() {
      return inFlight.size + completed.size;
    },
    reserve,
    load({ scope, key }) {
      const id = idOf(scope, key);
      return inFlight.get(id) ?? completed.get(id);
    },
    finalize({ scope, key, owner, response }) {
      const id = idOf(scope, key);
      const record = owned(id, owner);
      if (record === undefined) return false;
      const done: IdempotencyRecord = {
        scope: record.scope,
        key: record.key,
        fingerprint: record.fingerprint,
        owner: null,
        leaseUntilMs: record.leaseUntilMs,
        response,
        createdAtMs: record.createdAtMs,
        expiresAtMs: record.expiresAtMs,
      };
      // The cache would drop a record larger than its whole bound without a word, and the retry would run
      // again: refuse it instead, so the coordinator releases the key in the open.
      if (maxSizeBytes !== undefined && sizeOf(done) > maxSizeBytes) {
        return Promise.reject(
          new IdemStoreLimitError(
            `a response of ${sizeOf(done)} bytes does not fit the memory store's maxSizeBytes of ${maxSizeBytes}`,
          ),
        );
      }
      inFlight.delete(id);
      completed.set(id, done);
      return true;
    },
    release({ scope, key, owner }) {
      const id = idOf(scope, key);
      return owned(id, owner) !== undefined && inFlight.delete(id);
    },
    renewLease({ scope, key, owner, leaseUntilMs }) {
      const id = idOf(scope, key);
      const record = owned(id, owner);
      if (record === undefined) return false;
      inFlight.set(id, leased(record, owner, leaseUntilMs));
      return true;
    },
    async purgeExpired(params) {
      return purgeExpired(params);
    },
    async forget({ scope, key }) {
      const id = idOf(scope, key);
      return inFlight.delete(id) || completed.delete(id);
    },
    async list(params) {
      return list(params);
    },
    async stats(params) {
      checkStatsParams(params);
      const tally = new StatsTally(params);
      for (const record of everyRecord()) tally.add(record);
      return tally.result();
    },
    async close() {
      clearInterval(sweep);
    },
  };
}
