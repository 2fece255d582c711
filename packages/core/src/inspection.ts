import {
  type IdempotencyRecord,
  type ListedRecord,
  type ListParams,
  MAX_LIST_LIMIT,
  type RecordRef,
  type RecordStateAt,
  type StatsParams,
  type StoreStats,
} from './types.js';

// What stores share for the optional inspection methods (`forget`, `list`, `stats`): the rules of a state at a
// time, the checks of their arguments, the (scope, key) cursor of the stores that list in that order, and the
// counting of stores that count record by record.

const STATES: readonly RecordStateAt[] = ['in-flight', 'completed', 'expired'];

/** The state of `record` at `nowMs`: `expired` from its `expiresAtMs` on, whatever it held. */
export const recordStateAt = (record: IdempotencyRecord, nowMs: number): RecordStateAt =>
  record.expiresAtMs <= nowMs ? 'expired' : record.response === null ? 'in-flight' : 'completed';

const checkNow = (nowMs: unknown): void => {
  if (!Number.isSafeInteger(nowMs)) throw new RangeError(`nowMs must be an integer, got ${String(nowMs)}`);
};

/**
 * Refuse a scope that is not a string (`undefined` is none): an inspection's filter, or the scope a host's hook
 * gave a request, where anything else (a Promise of the principal, the principal object) is a bug of the host's
 * that would put requests of different principals under one scope.
 */
export const checkScope = (scope: unknown): void => {
  if (scope !== undefined && typeof scope !== 'string') {
    const thenable =
      typeof scope === 'object' && scope !== null && typeof (scope as { then?: unknown }).then === 'function';
    throw new TypeError(
      thenable
        ? 'scope must be a string, got a Promise: a scope is needed at once, return the string itself'
        : `scope must be a string, got ${scope === null ? 'null' : typeof scope}`,
    );
  }
};

/** Refuse `list` arguments no store can answer: a limit outside 1..{@link MAX_LIST_LIMIT}, an unknown state. */
export function checkListParams(params: ListParams): void {
  const { limit, state, cursor } = params;
  if (!Number.isSafeInteger(limit) || limit < 1 || limit > MAX_LIST_LIMIT)
    throw new RangeError(`limit must be an integer from 1 to ${MAX_LIST_LIMIT}, got ${String(limit)}`);
  if (state !== undefined && !STATES.includes(state))
    throw new RangeError(`state must be one of ${STATES.join(', ')}, got ${JSON.stringify(state)}`);
  if (cursor !== undefined && typeof cursor !== 'string')
    throw new TypeError(`cursor must be a string, got ${typeof cursor}`);
  checkScope(params.scope);
  checkNow(params.nowMs);
}

/** Refuse `stats` arguments no store can answer. */
export function checkStatsParams(params: StatsParams): void {
  checkScope(params.scope);
  checkNow(params.nowMs);
}

/** An opaque page cursor: `[tag, ...parts]` as base64url JSON, URL- and shell-safe. */
export const encodeCursor = (tag: string, parts: readonly unknown[]): string =>
  Buffer.from(JSON.stringify([tag, ...parts]), 'utf8').toString('base64url');

/** The `count` parts of a cursor {@link encodeCursor} made with `tag`; `undefined` for anything else. */
export function decodeCursor(cursor: string, tag: string, count: number): unknown[] | undefined {
  let parsed: unknown;
  try {
    parsed = /^[A-Za-z0-9_-]+$/.test(cursor)
      ? JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'))
      : undefined;
  } catch {}
  if (!Array.isArray(parsed) || parsed.length !== count + 1 || parsed[0] !== tag) return undefined;
  return parsed.slice(1);
}

const RECORD_CURSOR = 'k1';

/** The cursor after `ref`, for stores that list by (scope, key). */
export const encodeRecordCursor = (ref: RecordRef): string =>
  encodeCursor(RECORD_CURSOR, [ref.scope, ref.key]);

/** The (scope, key) a cursor of {@link encodeRecordCursor} stands after; a `RangeError` for anything else. */
export function decodeRecordCursor(cursor: string): RecordRef {
  const [scope, key] = decodeCursor(cursor, RECORD_CURSOR, 2) ?? [];
  if (typeof scope !== 'string' || typeof key !== 'string')
    throw new RangeError('malformed cursor: pass back the cursor of a page of this store');
  return { scope, key };
}

/** A record as `list` shows it: the body's size always, its bytes only with `bodies`. */
export function listedRecord(record: IdempotencyRecord, bodies: boolean): ListedRecord {
  const { response } = record;
  if (response === null) return record as ListedRecord;
  const { status, headers, body, bodyOmitted } = response;
  return {
    ...record,
    response: {
      status,
      headers,
      bodyBytes: body === null ? null : body.byteLength,
      ...(bodyOmitted === true ? { bodyOmitted } : {}),
      ...(bodies ? { body } : {}),
    },
  };
}

/** Whether `record` passes a list's scope and state filters at `nowMs`. */
export const listedBy = (params: ListParams, record: IdempotencyRecord): boolean =>
  (params.scope === undefined || record.scope === params.scope) &&
  (params.state === undefined || recordStateAt(record, params.nowMs) === params.state);

/** Counts {@link StoreStats} record by record, for stores that have no query to do it. */
export class StatsTally {
  private inFlight = 0;
  private leaseLapsed = 0;
  private completed = 0;
  private expired = 0;
  private oldest: number | null = null;

  constructor(private readonly params: StatsParams) {}

  add(record: IdempotencyRecord): void {
    const { nowMs, scope } = this.params;
    if (scope !== undefined && record.scope !== scope) return;
    const state = recordStateAt(record, nowMs);
    if (state === 'expired') this.expired++;
    else if (state === 'completed') this.completed++;
    else {
      this.inFlight++;
      if (record.leaseUntilMs <= nowMs) this.leaseLapsed++;
      if (this.oldest === null || record.createdAtMs < this.oldest) this.oldest = record.createdAtMs;
    }
  }

  result(): StoreStats {
    return {
      inFlight: this.inFlight,
      leaseLapsed: this.leaseLapsed,
      completed: this.completed,
      expired: this.expired,
      oldestInFlightCreatedAtMs: this.oldest,
    };
  }
}
