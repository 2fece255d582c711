import assert from 'node:assert/strict';
import type { IdempotencyRecord, IdempotencyStore, RecordRef, StoredResponse } from '@idem/core';
import { BASE_MS, jsonResponse, LEASE_MS, LIFETIME_MS, reserveAt } from '../harness.js';

/**
 * The time the inspection groups judge states at: a minute after the kit's records are created. Records that
 * expire before it expire in 2030 too, so a backend that expires records itself (by the wall clock) still holds
 * them while the kit runs.
 */
export const AT_MS = BASE_MS + 60_000;

/** What the inspection groups seed, as it stands at {@link AT_MS}. */
export type SeedState =
  /** In flight under a live lease. */
  | 'in-flight'
  /** In flight, its lease lapsed at AT_MS (`leaseUntilMs === AT_MS`): still in flight. */
  | 'lapsed'
  | 'completed'
  /** Completed, expired at AT_MS (`expiresAtMs === AT_MS`). */
  | 'expired-completed'
  /** In flight under a lease that never lapsed, expired before AT_MS all the same. */
  | 'expired-in-flight';

/** The state a {@link SeedState} has at AT_MS, as `list` and `stats` name it. */
export const stateAt = (seed: SeedState): 'in-flight' | 'completed' | 'expired' =>
  seed.startsWith('expired') ? 'expired' : seed === 'completed' ? 'completed' : 'in-flight';

export interface SeedOptions {
  /** When the record is first reserved. @default BASE_MS */
  readonly createdAtMs?: number;
  /** The response a completed record gets. @default a small JSON body */
  readonly response?: StoredResponse;
}

/** Write one record in `seed` state and return it as `load` reads it back. */
export async function seed(
  store: IdempotencyStore,
  ref: RecordRef,
  state: SeedState,
  options: SeedOptions = {},
): Promise<IdempotencyRecord> {
  const createdAtMs = options.createdAtMs ?? BASE_MS;
  assert.ok(createdAtMs < AT_MS - 1_000, 'seeded records are created before AT_MS');
  const expiresAtMs =
    state === 'expired-completed' ? AT_MS : state === 'expired-in-flight' ? AT_MS - 1 : AT_MS + LIFETIME_MS;
  const leaseUntilMs = state === 'lapsed' ? AT_MS : AT_MS + LEASE_MS;
  const params = reserveAt(ref, createdAtMs, { leaseUntilMs, expiresAtMs });
  const reserved = await store.reserve(params);
  assert.equal(reserved.outcome, 'reserved', `seeding ${JSON.stringify(ref)}: a fresh key is reserved`);
  if (state === 'completed' || state === 'expired-completed') {
    const response = options.response ?? jsonResponse(200, { ref });
    const done = await store.finalize({ ...ref, owner: params.owner, response, nowMs: createdAtMs + 1 });
    assert.equal(done, true, 'seeding: the owner finalizes');
  }
  const record = await store.load(ref);
  assert.ok(record !== undefined, 'seeding: the record is there');
  return record;
}

/** The identity of a record, for sets and messages. */
export const idOf = (ref: RecordRef): string => JSON.stringify([ref.scope, ref.key]);

/** `count` keys of one scope, named so that they sort in neither insertion nor numeric order. */
export const keysOf = (count: number): string[] =>
  Array.from({ length: count }, (_, i) => `k-${((i * 7919) % 1000).toString(36)}-${i}`);
