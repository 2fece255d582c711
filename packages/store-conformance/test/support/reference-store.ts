import {
  checkListParams,
  checkStatsParams,
  decideReservation,
  decodeRecordCursor,
  encodeRecordCursor,
  type IdempotencyRecord,
  type IdempotencyStore,
  listedBy,
  listedRecord,
  newReservation,
  type RecordRef,
  type ReserveParams,
  type ReserveResult,
  StatsTally,
} from '@idem/core';

/** The decision every correct reserve makes, given what is there now. */
export function decideReserve(existing: IdempotencyRecord | undefined, p: ReserveParams): ReserveResult {
  const decision = decideReservation(existing, p);
  if (existing !== undefined && decision === 'keep') return { outcome: 'exists', record: existing };
  if (existing !== undefined && decision === 'take-over') {
    return {
      outcome: 'reserved',
      record: { ...existing, owner: p.owner, leaseUntilMs: p.leaseUntilMs },
      tookOver: true,
    };
  }
  return { outcome: 'reserved', record: newReservation(p), tookOver: false };
}

/** (scope, key) order, as the reference store lists. */
export const byRef = (a: RecordRef, b: RecordRef): number =>
  a.scope < b.scope ? -1 : a.scope > b.scope ? 1 : a.key < b.key ? -1 : a.key > b.key ? 1 : 0;

/**
 * The simplest correct store, to prove the kit passes what it should. Each test's broken store replaces one
 * method of it with a plausible bug.
 */
export function createReferenceStore(
  breakIt: (
    records: Map<string, IdempotencyRecord>,
    store: IdempotencyStore,
  ) => Partial<IdempotencyStore> = () => ({}),
): IdempotencyStore {
  const records = new Map<string, IdempotencyRecord>();
  const id = (scope: string, key: string) => JSON.stringify([scope, key]);
  const owned = (scope: string, key: string, owner: string) => {
    const record = records.get(id(scope, key));
    return record?.response === null && record.owner === owner ? record : undefined;
  };
  const store: IdempotencyStore = {
    async reserve(p) {
      const result = decideReserve(records.get(id(p.scope, p.key)), p);
      if (result.outcome === 'reserved') records.set(id(p.scope, p.key), result.record);
      return result;
    },
    async load({ scope, key }) {
      return records.get(id(scope, key));
    },
    async finalize({ scope, key, owner, response }) {
      const record = owned(scope, key, owner);
      if (record === undefined) return false;
      records.set(id(scope, key), { ...record, owner: null, response });
      return true;
    },
    async release({ scope, key, owner }) {
      return owned(scope, key, owner) !== undefined && records.delete(id(scope, key));
    },
    async renewLease({ scope, key, owner, leaseUntilMs }) {
      const record = owned(scope, key, owner);
      if (record === undefined) return false;
      records.set(id(scope, key), { ...record, leaseUntilMs });
      return true;
    },
    async purgeExpired({ beforeMs, limit }) {
      let count = 0;
      for (const [recordId, record] of records) {
        if (count >= limit) break;
        if (record.expiresAtMs < beforeMs) {
          records.delete(recordId);
          count++;
        }
      }
      return count;
    },
    async forget({ scope, key }) {
      return records.delete(id(scope, key));
    },
    async list(params) {
      checkListParams(params);
      const after = params.cursor === undefined ? undefined : decodeRecordCursor(params.cursor);
      const listed = [...records.values()]
        .filter((record) => listedBy(params, record) && (after === undefined || byRef(record, after) > 0))
        .sort(byRef);
      const page = listed.slice(0, params.limit);
      const last = page.at(-1);
      return {
        records: page.map((record) => listedRecord(record, params.bodies === true)),
        cursor: listed.length > params.limit && last !== undefined ? encodeRecordCursor(last) : null,
      };
    },
    async stats(params) {
      checkStatsParams(params);
      const tally = new StatsTally(params);
      for (const record of records.values()) tally.add(record);
      return tally.result();
    },
  };
  return { ...store, ...breakIt(records, store) };
}
