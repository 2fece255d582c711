import {
  type Clock,
  hasListeners,
  type IdempotencyEventListeners,
  type IdempotencyRecord,
  type IdempotencyStore,
  type MaybePromise,
  type RecordRef,
  type ReplayCache,
  type ReserveResult,
  safeListener,
  systemClock,
} from '@idem/core';
import { LRUCache } from 'lru-cache';
import { idOf } from './create-memory-store.js';

/** Options of {@link withReplayCache}. */
export interface ReplayCacheOptions {
  /** The most completed records kept in memory; the least recently used go first. @default 10_000 */
  readonly maxEntries?: number;
  /**
   * Also bound the memory they take, in bytes (each record counts its body, its headers and 256 bytes). A
   * record larger than this is simply not cached.
   * @default none
   */
  readonly maxBytes?: number;
  /**
   * The clock `load` checks expiry with (it has no `nowMs` of its own; `reserve` uses the caller's).
   * @default the system clock
   */
  readonly clock?: Clock;
  /** Receives a `cache` event (`hit` or `miss`) for every `reserve` and `load`. Pass the coordinator's listeners. */
  readonly onEvent?: IdempotencyEventListeners;
}

const RECORD_OVERHEAD_BYTES = 256;
/** How long, and for how many keys, a key forgotten through this node is not cached again (see `forget`). */
const FORGOTTEN_MS = 5 * 60_000;
const FORGOTTEN_ENTRIES = 10_000;
/** A store's answer that comes later (a promise, a lazy query), not now. */
const isThenable = <T>(value: MaybePromise<T>): value is PromiseLike<T> =>
  value !== null &&
  (typeof value === 'object' || typeof value === 'function') &&
  typeof (value as { then?: unknown }).then === 'function';
const sizeOf = (record: IdempotencyRecord): number => {
  const { response } = record;
  let headers = 0;
  for (const [name, value] of Object.entries(response?.headers ?? {})) headers += name.length + value.length;
  return RECORD_OVERHEAD_BYTES + headers + (response?.body?.byteLength ?? 0);
};

/**
 * Put an in-process cache of completed records in front of any store, so that a replay (the retry of a request
 * that already has its answer) costs no round trip: `reserve` and `load` of a cached record are answered from
 * memory while it has not expired (`nowMs < expiresAtMs`; past that it is dropped and the store is asked).
 *
 * This is safe without any invalidation between nodes because a completed record never changes before it
 * expires: `finalize` and `renewLease` only touch in-flight records, `release` never deletes a completed one,
 * `reserve` replaces one only once it expired, and `purgeExpired` deletes only expired ones. So in-flight
 * records are never cached, and every fenced call (`finalize`, `release`, `renewLease`) and `purgeExpired` go
 * to the store, which stays the one place that decides. `limits` and `close` are the store's.
 *
 * The store's optional inspection methods are passed through when it has them (and only then): `list` and
 * `stats` as they are, and `forget`, an operator's delete and the one way a completed record goes before it
 * expires, also drops the record from this cache (and keeps it out for a few minutes, against reads already on
 * their way). The caches of other nodes are not told: they may replay a forgotten record until it ages out.
 *
 * A coordinator that reserves in the host's transaction (`reserveIn: 'transaction'`, which goes past this
 * wrapper to the store's transactional view) uses the cache through the returned store's `replayCache`: it
 * looks there before the transaction begins and keeps what the transactional reserves find completed.
 *
 * Records are shared between callers: treat them as immutable, as the coordinator does.
 *
 * @param store The store to put the cache in front of (memory, SQL, Redis or yours).
 * @param options Bounds (`maxEntries`, `maxBytes`), the clock of `load`, and `onEvent` for hit/miss events.
 *
 * @example
 * const store = withReplayCache(createSqlStore(db, { dialect: 'postgres' }), { maxEntries: 50_000, maxBytes: 64 << 20 });
 * const idem = createIdempotency({ store });
 */
export function withReplayCache(store: IdempotencyStore, options: ReplayCacheOptions = {}): IdempotencyStore {
  const clock = options.clock ?? systemClock;
  const emit = safeListener(options.onEvent);
  const listening = hasListeners(emit);
  const { maxBytes } = options;
  if (maxBytes !== undefined && !(maxBytes > 0))
    throw new RangeError(`maxBytes must be positive, got ${maxBytes}`);
  const cache = new LRUCache<string, IdempotencyRecord>({
    max: options.maxEntries ?? 10_000,
    ...(maxBytes === undefined ? {} : { maxSize: maxBytes, sizeCalculation: sizeOf }),
  });

  /** The cached record of (scope, key) if it is still alive at `nowMs`; an expired one is dropped. */
  const hit = (id: string, nowMs: number): IdempotencyRecord | undefined => {
    const record = cache.get(id);
    if (record === undefined) return undefined;
    if (nowMs < record.expiresAtMs) return record;
    cache.delete(id);
    return undefined;
  };
  /** Keep a record the store answered with, when it is completed and alive: it cannot change until it expires. */
  const keep = (id: string, record: IdempotencyRecord | undefined, nowMs: number): void => {
    if (record !== undefined && record.response !== null && nowMs < record.expiresAtMs) cache.set(id, record);
  };
  // `forget` is the one way a completed record goes before it expires. A reserve or load (or a transactional
  // reserve offering its find) that read the store before a forget deleted the record may answer after the
  // forget cleared the cache, and would put the forgotten record back. So a key forgotten through this node is
  // not cached again for a while: longer than any store call takes, bounded in count. Forgets are rare.
  const forgotten = new LRUCache<string, true>({ max: FORGOTTEN_ENTRIES, ttl: FORGOTTEN_MS });
  /** `keep`, unless the key was forgotten on this node a moment ago. */
  const keepRead = (id: string, record: IdempotencyRecord | undefined, nowMs: number): void => {
    if (!forgotten.has(id)) keep(id, record, nowMs);
  };

  // A hit answers synchronously; a miss answers as the store does (synchronously, or with a promise).
  const cached: IdempotencyStore = {
    reserve(params) {
      const id = idOf(params.scope, params.key);
      const record = hit(id, params.nowMs);
      const { scope, key } = params;
      if (record !== undefined) {
        if (listening) emit({ type: 'cache', outcome: 'hit', operation: 'reserve', scope, key });
        return { outcome: 'exists', record };
      }
      if (listening) emit({ type: 'cache', outcome: 'miss', operation: 'reserve', scope, key });
      const kept = (result: ReserveResult): ReserveResult => {
        if (result.outcome === 'exists') keepRead(id, result.record, params.nowMs);
        return result;
      };
      const result = store.reserve(params);
      return isThenable(result) ? Promise.resolve(result).then(kept) : kept(result);
    },
    load(ref) {
      const id = idOf(ref.scope, ref.key);
      const nowMs = clock.nowMs();
      const record = hit(id, nowMs);
      if (listening) {
        const { scope, key } = ref;
        emit({
          type: 'cache',
          outcome: record === undefined ? 'miss' : 'hit',
          operation: 'load',
          scope,
          key,
        });
      }
      if (record !== undefined) return record;
      const kept = (loaded: IdempotencyRecord | undefined): IdempotencyRecord | undefined => {
        keepRead(id, loaded, nowMs);
        return loaded;
      };
      const loaded = store.load(ref);
      return isThenable(loaded) ? Promise.resolve(loaded).then(kept) : kept(loaded);
    },
    finalize: (params) => store.finalize(params),
    release: (params) => store.release(params),
    renewLease: (params) => store.renewLease(params),
    purgeExpired: (params) => store.purgeExpired(params),
  };
  // For a coordinator that reserves in the host's transaction (`reserveIn: 'transaction'`), past this wrapper.
  const replayCache: ReplayCache = {
    get(ref, nowMs) {
      const record = hit(idOf(ref.scope, ref.key), nowMs);
      const { scope, key } = ref;
      emit({
        type: 'cache',
        outcome: record === undefined ? 'miss' : 'hit',
        operation: 'reserve',
        scope,
        key,
      });
      return record;
    },
    keep: (record, nowMs) => keepRead(idOf(record.scope, record.key), record, nowMs),
  };
  // The optional inspection methods are the store's, when it has them; forget also drops the cached record, or
  // this node would go on replaying what the store no longer holds.
  const forget = store.forget?.bind(store);
  const list = store.list?.bind(store);
  const stats = store.stats?.bind(store);
  const inspection: Pick<IdempotencyStore, 'forget' | 'list' | 'stats'> = {
    ...(forget === undefined
      ? {}
      : {
          async forget(ref: RecordRef) {
            const id = idOf(ref.scope, ref.key);
            forgotten.set(id, true);
            cache.delete(id);
            try {
              return await forget(ref);
            } finally {
              // From the end of the delete on: a read that started during it may still be on its way.
              forgotten.set(id, true);
              cache.delete(id);
            }
          },
        }),
    ...(list === undefined ? {} : { list }),
    ...(stats === undefined ? {} : { stats }),
  };
  return {
    ...cached,
    ...inspection,
    replayCache,
    ...(store.limits === undefined ? {} : { limits: store.limits }),
    ...(store.close === undefined ? {} : { close: async () => await store.close?.() }),
  };
}
