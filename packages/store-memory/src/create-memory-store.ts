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
  const maxEntries = options.maxEntries ?? 10_000;
  if (!Number.isSafeInteger(maxEntries) || maxEntries < 1) {
    throw new RangeError(`maxEntries must be a positive integer, got ${maxEntries}`);
  }
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

  /**
   * Every record, in flight (it has an owner) and completed (it has none), by id, least recently used first: a
   * key's first use puts it last, a replay moves it last, and completing it in place keeps it there (a request
   * that ran long is moved last when eviction reaches it). One `Map`, so that completing a record moves
   * nothing: the memory store costs a request two lookups, two writes and, when full, one eviction.
   */
  const records = new Map<string, IdempotencyRecord>();
  let completedCount = 0;
  let completedBytes = 0;

  /** `record` (completed) is gone from `records`: count it out. */
  const uncount = (record: IdempotencyRecord): void => {
    completedCount--;
    if (maxSizeBytes !== undefined) completedBytes -= sizeOf(record);
  };
  /** `id`, used now: moved last. */
  const touch = (id: string, record: IdempotencyRecord): void => {
    records.delete(id);
    records.set(id, record);
  };

  /**
   * The records from the least recently used on, read by one iterator that lives as long as the store: a `Map`
   * leaves a hole where an entry is deleted until it grows, and a new iterator would step over every hole
   * eviction left at the front, again on every eviction.
   */
  let oldest = records.keys();

  /**
   * Drop the least recently used completed records while over a bound. In-flight records are never dropped
   * (that would let a duplicate run while the first still executes): one met first is moved last, as is
   * `kept`, the record just completed, so that each is passed over once.
   */
  const evict = (kept: IdempotencyRecord): void => {
    while (
      completedCount > maxEntries ||
      (maxSizeBytes !== undefined && completedBytes > maxSizeBytes && completedCount > 1)
    ) {
      let next = oldest.next();
      if (next.done === true) {
        oldest = records.keys();
        next = oldest.next();
        if (next.done === true) return;
      }
      const id = next.value;
      const record = records.get(id) as IdempotencyRecord;
      if (record.owner !== null || record === kept) {
        touch(id, record);
        continue;
      }
      records.delete(id);
      uncount(record);
      if (listening) emit({ type: 'evicted', scope: record.scope, key: record.key, reason: 'capacity' });
    }
  };

  /** Remove the record of `id`, whichever state it is in; `true` when there was one. */
  const remove = (id: string): boolean => {
    const record = records.get(id);
    if (record === undefined) return false;
    records.delete(id);
    if (record.owner === null) uncount(record);
    return true;
  };

  const purgeExpired = ({ beforeMs, limit }: { beforeMs: number; limit: number }): number => {
    const expired: string[] = [];
    for (const [id, record] of records) {
      if (expired.length >= limit) break;
      if (record.expiresAtMs < beforeMs) expired.push(id);
    }
    for (const id of expired) remove(id);
    return expired.length;
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
    const existing = records.get(id);
    const decision = decideReservation(existing, params);
    if (existing === undefined) {
      const record = newReservation(params);
      records.set(id, record);
      return { outcome: 'reserved', record, tookOver: false };
    }
    if (decision === 'keep') {
      if (existing.owner === null) touch(id, existing); // a replay is a use
      return { outcome: 'exists', record: existing };
    }
    const record =
      decision === 'take-over'
        ? { ...existing, owner: params.owner, leaseUntilMs: params.leaseUntilMs }
        : newReservation(params);
    if (existing.owner === null) uncount(existing); // an expired one, replaced
    records.set(id, record);
    return { outcome: 'reserved', record, tookOver: decision === 'take-over' };
  };

  const list = (params: ListParams): RecordPage => {
    checkListParams(params);
    const after = params.cursor === undefined ? undefined : decodeRecordCursor(params.cursor);
    const listed: IdempotencyRecord[] = [];
    for (const record of records.values()) {
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
    const record = records.get(id);
    return record !== undefined && record.owner === owner ? record : undefined;
  };

  // Every method runs synchronously (the calls of a request answer so; the rest inside an async function):
  // nothing interleaves between its read and its write, which is what makes reserve atomic within this process.
  return {
    limits: maxSizeBytes === undefined ? {} : { maxBodyBytes: maxSizeBytes - RECORD_OVERHEAD_BYTES },
    get size() {
      return records.size;
    },
    reserve,
    load({ scope, key }) {
      const id = idOf(scope, key);
      const record = records.get(id);
      if (record?.owner === null) touch(id, record);
      return record;
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
      records.set(id, done);
      completedCount++;
      if (maxSizeBytes !== undefined) completedBytes += sizeOf(done);
      evict(done);
      return true;
    },
    release({ scope, key, owner }) {
      const id = idOf(scope, key);
      return owned(id, owner) !== undefined && records.delete(id);
    },
    renewLease({ scope, key, owner, leaseUntilMs }) {
      const id = idOf(scope, key);
      const record = owned(id, owner);
      if (record === undefined) return false;
      records.set(id, { ...record, leaseUntilMs });
      return true;
    },
    async purgeExpired(params) {
      return purgeExpired(params);
    },
    async forget({ scope, key }) {
      return remove(idOf(scope, key));
    },
    async list(params) {
      return list(params);
    },
    async stats(params) {
      checkStatsParams(params);
      const tally = new StatsTally(params);
      for (const record of records.values()) tally.add(record);
      return tally.result();
    },
    async close() {
      clearInterval(sweep);
    },
  };
}
