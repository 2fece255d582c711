import { recordState } from './decision.js';
import type { IdempotencyRecord, ReserveParams } from './types.js';

/**
 * What `reserve` does to the record it finds, per the SPI: `create` when there is none, `replace` when it
 * expired (`expiresAtMs <= nowMs`, whatever its fingerprint or state), `take-over` when it is in flight with a
 * lapsed lease (`leaseUntilMs <= nowMs`) and the caller's fingerprint, and `keep` otherwise.
 *
 * A store that decides in application code (under a lock, or in one synchronous step) uses this; a SQL store
 * encodes the same rule in its statement.
 */
export function decideReservation(
  existing: IdempotencyRecord | undefined,
  params: Pick<ReserveParams, 'nowMs' | 'fingerprint'>,
): 'create' | 'replace' | 'take-over' | 'keep' {
  if (existing === undefined) return 'create';
  if (existing.expiresAtMs <= params.nowMs) return 'replace';
  if (
    recordState(existing) === 'in-flight' &&
    existing.leaseUntilMs <= params.nowMs &&
    existing.fingerprint === params.fingerprint
  ) {
    return 'take-over';
  }
  return 'keep';
}

/** The record a `create` or `replace` leaves: exactly the caller's parameters, in flight. */
export function newReservation(params: ReserveParams): IdempotencyRecord {
  return {
    scope: params.scope,
    key: params.key,
    fingerprint: params.fingerprint,
    owner: params.owner,
    leaseUntilMs: params.leaseUntilMs,
    response: null,
    createdAtMs: params.nowMs,
    expiresAtMs: params.expiresAtMs,
  };
}
