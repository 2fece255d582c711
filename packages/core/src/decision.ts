import { ErrorCode, IdemStoreLimitError, isIdemError, isStoreLimitError } from './errors.js';
import type { IdempotencyRecord, ReserveParams, ReserveResult, StoredResponse } from './types.js';

/**
 * The state of a record, by name: `in-flight` (reserved by an owner, no answer yet) or `completed` (its answer
 * is stored). The SPI's record says the same with `response === null`; this is the name for it.
 */
export type RecordState = 'in-flight' | 'completed';

/** A record reserved by an owner whose answer is not stored yet. */
export type InFlightRecord = IdempotencyRecord & { readonly response: null };

/** A record whose answer is stored: every retry replays it. */
export type CompletedRecord = IdempotencyRecord & { readonly response: StoredResponse };

export const recordState = (record: IdempotencyRecord): RecordState =>
  record.response === null ? 'in-flight' : 'completed';

export const isCompleted = (record: IdempotencyRecord): record is CompletedRecord => record.response !== null;

/**
 * What a failed store call means for the request: `in-progress` (a duplicate held the record's row past the
 * database's lock wait: the store threw an {@link IdemInProgressError}), `limit` (the store cannot hold a value of
 * this request: an {@link IdemStoreLimitError}; retrying cannot help), or `fault` (anything else: an exception,
 * or no answer in time; retrying later may).
 */
export type StoreFailure = 'in-progress' | 'limit' | 'fault';

export function classifyStoreFailure(error: unknown): StoreFailure {
  if (isStoreLimitError(error)) return 'limit';
  if (isIdemError(error) && error.code === ErrorCode.InProgress) return 'in-progress';
  return 'fault';
}

/** The coordinator's answer to a value the store refused: the one message, whichever call it refused. */
export const storeLimitError = (cause: Error, status: number): IdemStoreLimitError =>
  new IdemStoreLimitError(`the idempotency store cannot hold this request: ${cause.message}`, {
    cause,
    status,
  });

/**
 * What a request gets, decided from what `reserve` found (or how it failed):
 *
 * | found                                          | decision      |
 * | ---------------------------------------------- | ------------- |
 * | reserved (fresh, or a lapsed lease taken over) | `execute`     |
 * | a record with another fingerprint              | `mismatch`    |
 * | a completed record                             | `replay`      |
 * | an in-flight record                            | `in-progress` |
 * | a duplicate holding the row past a lock wait   | `in-progress` |
 * | a value the store cannot hold                  | `store-limit` |
 * | a fault (exception, timeout)                   | `unavailable` |
 */
export type Decision =
  | { readonly answer: 'execute'; readonly tookOver: boolean }
  | { readonly answer: 'replay'; readonly response: StoredResponse }
  | { readonly answer: 'mismatch' }
  | { readonly answer: 'in-progress'; readonly found: 'record' | 'lock-wait' }
  | { readonly answer: 'store-limit'; readonly error: Error }
  | { readonly answer: 'unavailable'; readonly error: unknown };

/** How a `reserve` call ended: its result, or the error it failed with. */
export type ReserveFound =
  | { readonly ok: true; readonly value: ReserveResult }
  | { readonly ok: false; readonly error: unknown };

const RESERVED: Decision = { answer: 'execute', tookOver: false };
const TOOK_OVER: Decision = { answer: 'execute', tookOver: true };
const MISMATCH: Decision = { answer: 'mismatch' };
const IN_FLIGHT: Decision = { answer: 'in-progress', found: 'record' };
const LOCK_WAIT: Decision = { answer: 'in-progress', found: 'lock-wait' };

/** The one decision of the coordinator: from what `reserve` found, and this request's fingerprint. Pure. */
export function decide(found: ReserveFound, fingerprint: string): Decision {
  if (!found.ok) {
    const { error } = found;
    switch (classifyStoreFailure(error)) {
      case 'in-progress':
        return LOCK_WAIT;
      case 'limit':
        return { answer: 'store-limit', error: error as Error };
      case 'fault':
        return { answer: 'unavailable', error };
    }
  }
  const result = found.value;
  if (result.outcome === 'reserved') return result.tookOver ? TOOK_OVER : RESERVED;
  const { record } = result;
  if (record.fingerprint !== fingerprint) return MISMATCH;
  return isCompleted(record) ? { answer: 'replay', response: record.response } : IN_FLIGHT;
}

/** The one place reserve parameters are built: a reservation by `owner` now, under a lease, kept `keepMs`. */
export function reserveParams(
  record: {
    readonly scope: string;
    readonly key: string;
    readonly fingerprint: string;
    readonly owner: string;
  },
  nowMs: number,
  leaseMs: number,
  keepMs: number,
): ReserveParams {
  return {
    scope: record.scope,
    key: record.key,
    fingerprint: record.fingerprint,
    owner: record.owner,
    nowMs,
    leaseUntilMs: nowMs + leaseMs,
    expiresAtMs: nowMs + keepMs,
  };
}
