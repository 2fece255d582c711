/**
 * The response of a completed request, as a store keeps it and the coordinator replays it.
 *
 * Headers are already filtered by the allow-list (never `set-cookie`, `date` or auth headers) and their
 * names are lower-case.
 */
export interface StoredResponse {
  /** HTTP status code, 100–599. */
  readonly status: number;
  /** Allow-listed response headers, lower-case names. Multiple values are joined with `, `. */
  readonly headers: Readonly<Record<string, string>>;
  /**
   * The exact response bytes, or `null` when there was no body or it exceeded the body cap (then
   * {@link StoredResponse.bodyOmitted} is `true`). A store MUST round-trip these bytes unchanged.
   */
  readonly body: Uint8Array | null;
  /** `true` when the body was larger than the cap and was not stored. A store MUST keep this flag. */
  readonly bodyOmitted?: true;
}

/**
 * One idempotency record: a (scope, key) pair that is either in flight (reserved by an owner) or completed.
 *
 * A record is completed exactly when `response !== null`.
 */
export interface IdempotencyRecord {
  /** Who owns the key (tenant, catalog prefix, principal …). Keys in different scopes are unrelated. */
  readonly scope: string;
  /** The normalized `Idempotency-Key` value. */
  readonly key: string;
  /** SHA-256 hex of the request identity; another fingerprint under the same key is misuse. */
  readonly fingerprint: string;
  /** The token of the attempt that holds the reservation; `null` once completed. */
  readonly owner: string | null;
  /** Epoch ms until which the in-flight reservation is honoured without renewal. */
  readonly leaseUntilMs: number;
  /** The stored response once completed; `null` while in flight. */
  readonly response: StoredResponse | null;
  /** Epoch ms of the first reservation of this key. Kept across lease takeovers. */
  readonly createdAtMs: number;
  /** Epoch ms from which the record is forgotten and may be purged or replaced. */
  readonly expiresAtMs: number;
}

/** Arguments of {@link IdempotencyStore.reserve}. */
export interface ReserveParams {
  readonly scope: string;
  readonly key: string;
  readonly fingerprint: string;
  /** A token for this attempt, never used by another (the coordinator's: a random per-process prefix and a counter). */
  readonly owner: string;
  /** The caller's current time, epoch ms. Stores compare against it and never read a clock of their own. */
  readonly nowMs: number;
  /** Epoch ms until which the new reservation is honoured. */
  readonly leaseUntilMs: number;
  /** Epoch ms at which a newly created record expires. Ignored on takeover (the original is kept). */
  readonly expiresAtMs: number;
}

/** The result of {@link IdempotencyStore.reserve}: an expected outcome, never an exception. */
export type ReserveResult =
  | {
      readonly outcome: 'reserved';
      /** The record as it now stands, owned by the caller. */
      readonly record: IdempotencyRecord;
      /** `true` when an in-flight reservation whose lease had lapsed was taken over. */
      readonly tookOver: boolean;
    }
  | {
      readonly outcome: 'exists';
      /** The current record, untouched. */
      readonly record: IdempotencyRecord;
    };

/** Identifies one record. */
export interface RecordRef {
  readonly scope: string;
  readonly key: string;
}

/** Identifies one record and the owner that claims it. */
export interface OwnedRecordRef extends RecordRef {
  readonly owner: string;
}

/** Arguments of {@link IdempotencyStore.finalize}. */
export interface FinalizeParams extends OwnedRecordRef {
  readonly response: StoredResponse;
  /** The caller's current time, epoch ms (stores may record it as the update time). */
  readonly nowMs: number;
}

/** Arguments of {@link IdempotencyStore.renewLease}. */
export interface RenewLeaseParams extends OwnedRecordRef {
  /** The new end of the lease, epoch ms. */
  readonly leaseUntilMs: number;
}

/** Arguments of {@link IdempotencyStore.purgeExpired}. */
export interface PurgeParams {
  /** Records with `expiresAtMs < beforeMs` are purged. */
  readonly beforeMs: number;
  /** The most records one call deletes; a positive integer. */
  readonly limit: number;
}

/**
 * What a record is at a given time, as an operator sees it: `expired` once `expiresAtMs <= nowMs` (in flight or
 * completed: `reserve` may replace it and nothing replays it), else `in-flight` or `completed`.
 */
export type RecordStateAt = 'in-flight' | 'completed' | 'expired';

/** Arguments of {@link IdempotencyStore.list}. */
export interface ListParams {
  /** Only the records of this scope. @default every scope */
  readonly scope?: string;
  /** Only the records in this state at `nowMs`. @default every state */
  readonly state?: RecordStateAt;
  /** Where the previous page ended ({@link RecordPage.cursor}); omitted for the first page. */
  readonly cursor?: string;
  /** The most records on this page: an integer from 1 to {@link MAX_LIST_LIMIT}. */
  readonly limit: number;
  /** The caller's current time, epoch ms: what `state` is judged at. */
  readonly nowMs: number;
  /** Include each stored body. @default false: bodies are never read out unless asked for */
  readonly bodies?: boolean;
}

/** The largest page {@link IdempotencyStore.list} returns. */
export const MAX_LIST_LIMIT = 1000;

/** A stored response as {@link IdempotencyStore.list} shows it: its size always, its bytes only when asked. */
export interface ListedResponse {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  /** The body's size in bytes, `null` when there is none (no body, or an omitted one). */
  readonly bodyBytes: number | null;
  readonly bodyOmitted?: true;
  /** The body, present only when the list was asked for `bodies`. */
  readonly body?: Uint8Array | null;
}

/** A record as {@link IdempotencyStore.list} shows it. */
export interface ListedRecord extends Omit<IdempotencyRecord, 'response'> {
  readonly response: ListedResponse | null;
}

/** One page of {@link IdempotencyStore.list}. */
export interface RecordPage {
  readonly records: readonly ListedRecord[];
  /** Pass it as `cursor` for the next page; `null` when there is none. Opaque: only its store reads it. */
  readonly cursor: string | null;
}

/** Arguments of {@link IdempotencyStore.stats}. */
export interface StatsParams {
  /** The caller's current time, epoch ms: what each record's state is judged at. */
  readonly nowMs: number;
  /** Only the records of this scope. @default every scope */
  readonly scope?: string;
}

/** What {@link IdempotencyStore.stats} counts, at the caller's `nowMs`. */
export interface StoreStats {
  readonly inFlight: number;
  /** In-flight records whose lease has lapsed (`leaseUntilMs <= nowMs`): a handler that died or hangs. */
  readonly leaseLapsed: number;
  readonly completed: number;
  /** Expired records not purged yet (0 for a store whose backend deletes them itself). */
  readonly expired: number;
  /** `createdAtMs` of the oldest in-flight record, `null` when none is in flight. */
  readonly oldestInFlightCreatedAtMs: number | null;
}

/** What a store can hold, declared so that the coordinator stays within it. */
export interface StoreLimits {
  /**
   * The largest response body the store keeps, in bytes. The coordinator stores larger bodies as omitted
   * (status and headers only, `bodyOmitted: true`), as it does above its own `maxBodyBytes`.
   */
  readonly maxBodyBytes?: number;
}

/**
 * What a store method returns: its result, or a promise (any thenable) of it. A store that answers in this
 * process (memory, a cache hit) returns the value itself and costs the request no promise; the coordinator
 * adopts a thenable once and holds it to its deadline.
 */
export type MaybePromise<T> = T | PromiseLike<T>;

/**
 * The storage SPI every idempotency store implements.
 *
 * Every method takes one object and returns its result, or a promise of it ({@link MaybePromise}). Expected
 * outcomes are returned as values; a method throws (or rejects) only on a fault (database unreachable, connection lost, malformed input the backend cannot hold).
 * All times are epoch milliseconds computed by the caller: a store compares them and never reads a clock.
 */
export interface IdempotencyStore {
  /**
   * Atomically reserve (scope, key) for `owner`.
   *
   * Of any number of concurrent calls for one (scope, key), on any number of processes sharing the backend,
   * exactly one MUST get `reserved`. The result is `reserved` when the store
   * - created the record (no record existed), or
   * - replaced an expired record (`expiresAtMs <= nowMs`, whatever its fingerprint or state), or
   * - took over an in-flight record whose lease lapsed (`leaseUntilMs <= nowMs`) and whose fingerprint equals
   *   the caller's: `tookOver: true`, the new owner and lease are stored, `createdAtMs` and `expiresAtMs`
   *   are kept.
   *
   * Otherwise the result is `exists` with the current record, which MUST NOT be changed (a lapsed lease
   * with another fingerprint stays put; the coordinator answers it as misuse).
   */
  reserve(params: ReserveParams): MaybePromise<ReserveResult>;

  /** The record for (scope, key), in flight or completed, or `undefined` when there is none. */
  load(params: RecordRef): MaybePromise<IdempotencyRecord | undefined>;

  /**
   * Store the response, owner-fenced: only when the record is in flight AND owned by `owner`.
   *
   * Returns `true` when stored. Returns `false` and MUST change nothing when ownership was lost, the record
   * is already completed, or it is gone. After a successful finalize the record's owner is `null`.
   */
  finalize(params: FinalizeParams): MaybePromise<boolean>;

  /**
   * Delete an in-flight reservation held by `owner`, so that the client's retry executes again.
   *
   * Returns `true` when deleted, `false` otherwise. MUST NOT delete a completed record or another owner's.
   */
  release(params: OwnedRecordRef): MaybePromise<boolean>;

  /**
   * Extend the lease of an in-flight reservation held by `owner` (a heartbeat for long handlers).
   *
   * Returns `false`, changing nothing, when the record is completed, gone, or owned by someone else.
   */
  renewLease(params: RenewLeaseParams): MaybePromise<boolean>;

  /**
   * Delete at most `limit` records with `expiresAtMs < beforeMs` and return how many were deleted.
   *
   * MUST be safe to run from many nodes at once; the caller loops in batches until a batch comes back short.
   */
  purgeExpired(params: PurgeParams): MaybePromise<number>;

  /**
   * An operator's delete: remove the record of (scope, key) whatever its state, in flight or completed, with
   * no owner check. `true` when a record was deleted. A retry of a forgotten key executes again, and an in-flight
   * handler that still runs loses its fence (its finalize answers `false`). Optional; the conformance kit tests
   * it when present. A per-node replay cache elsewhere may go on replaying the record until it ages out.
   */
  forget?(params: RecordRef): MaybePromise<boolean>;

  /**
   * Records in a stable order of the store's choosing, a page at a time: every record present from the first
   * page to the last is listed at least once (the SQL and memory stores list each once, by scope and key).
   * Bodies are read only when `bodies` is set. A cursor another store made, or a malformed one, is refused with a
   * `RangeError`. Optional; for inspection, never on a request's path.
   */
  list?(params: ListParams): MaybePromise<RecordPage>;

  /** Counts by state at `nowMs` and the age of the oldest in-flight record. Optional; for inspection. */
  stats?(params: StatsParams): MaybePromise<StoreStats>;

  /** Release what the store opened itself. MUST NOT close a client or pool the user passed in. */
  close?(): MaybePromise<void>;

  /**
   * What this store can hold. A value beyond what the backend holds (declared here or not) MUST be refused
   * with a `IdemStoreLimitError` (from this package) before it reaches the backend, never truncated or mangled: the
   * coordinator answers that with a non-retryable 4xx, where any other exception reads as an outage.
   */
  readonly limits?: StoreLimits;

  /**
   * The completed records this store answers from process memory, when it has such a cache (`withReplayCache`
   * in `@idem/store-memory` does). Its own `reserve` and `load` use it already; with `reserveIn: 'transaction'`
   * the coordinator uses it too, since the reservation goes through the host's transaction instead: it looks
   * there before the transaction begins (a hit replays without one) and offers it the completed records the
   * transactional reserves find.
   */
  readonly replayCache?: ReplayCache;
}

/**
 * An in-process cache of completed records ({@link IdempotencyStore.replayCache}). Safe without invalidation
 * because a completed record never changes before it expires. Both methods are synchronous and do no I/O.
 */
export interface ReplayCache {
  /** The completed record of (scope, key) if it is kept and alive at `nowMs`, else `undefined`. */
  get(ref: RecordRef, nowMs: number): IdempotencyRecord | undefined;
  /**
   * Keep a completed record that a reserve found committed in the store (one in flight, or expired at `nowMs`,
   * is ignored). A host reserves a key once per transaction, so what a transactional reserve finds completed
   * was committed by another transaction.
   */
  keep(record: IdempotencyRecord, nowMs: number): void;
}

/**
 * The store calls of one host transaction: a record reserved, finalized or released through it commits or
 * rolls back with the host's own writes (the SQL store gives one per transaction: `store.inTransaction(tx)`).
 * Same contracts as the {@link IdempotencyStore} methods of the same names, except that `reserve` may wait on
 * a concurrent transaction holding the key; when that wait runs out it throws an `IdemInProgressError`.
 */
export interface TransactionalStore {
  reserve(params: ReserveParams): MaybePromise<ReserveResult>;
  finalize(params: FinalizeParams): MaybePromise<boolean>;
  release(params: OwnedRecordRef): MaybePromise<boolean>;
}

/** A source of the current time in epoch milliseconds. Inject one to control time in tests. */
export interface Clock {
  nowMs(): number;
}

/** The wall clock. */
export const systemClock: Clock = { nowMs: () => Date.now() };
