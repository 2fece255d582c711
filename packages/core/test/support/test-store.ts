import {
  decideReservation,
  type IdempotencyRecord,
  type IdempotencyStore,
  IdemStoreLimitError,
  newReservation,
  type StoreOperation,
} from '@idem/core';

type Operation = Exclude<StoreOperation, never>;
type Fault = 'throw' | 'hang' | 'limit';

/**
 * A minimal correct store for the coordinator's unit tests, with the fault injection they need: make an
 * operation throw, or hang until released. (The real stores are proven by the conformance kit.)
 */
export function createTestStore() {
  const records = new Map<string, IdempotencyRecord>();
  const calls: Operation[] = [];
  const faults = new Map<Operation, Fault>();
  const hung: (() => void)[] = [];
  const id = (scope: string, key: string) => JSON.stringify([scope, key]);

  async function enter(operation: Operation): Promise<void> {
    calls.push(operation);
    const fault = faults.get(operation);
    if (fault === 'throw') throw new Error(`injected ${operation} failure`);
    if (fault === 'limit') throw new IdemStoreLimitError(`injected ${operation} limit`);
    if (fault === 'hang') await new Promise<void>((resolve) => hung.push(resolve));
  }

  const owned = (scope: string, key: string, owner: string) => {
    const record = records.get(id(scope, key));
    return record !== undefined && record.response === null && record.owner === owner ? record : undefined;
  };

  const store: IdempotencyStore = {
    async reserve(p) {
      await enter('reserve');
      const existing = records.get(id(p.scope, p.key));
      const decision = decideReservation(existing, p);
      if (existing !== undefined && decision === 'keep') return { outcome: 'exists', record: existing };
      const tookOver = existing !== undefined && decision === 'take-over';
      const record = tookOver
        ? { ...existing, owner: p.owner, leaseUntilMs: p.leaseUntilMs }
        : newReservation(p);
      records.set(id(p.scope, p.key), record);
      return { outcome: 'reserved', record, tookOver };
    },
    async load({ scope, key }) {
      await enter('load');
      return records.get(id(scope, key));
    },
    async finalize({ scope, key, owner, response }) {
      await enter('finalize');
      const record = owned(scope, key, owner);
      if (record === undefined) return false;
      records.set(id(scope, key), { ...record, owner: null, response });
      return true;
    },
    async release({ scope, key, owner }) {
      await enter('release');
      return owned(scope, key, owner) !== undefined && records.delete(id(scope, key));
    },
    async renewLease({ scope, key, owner, leaseUntilMs }) {
      await enter('renewLease');
      const record = owned(scope, key, owner);
      if (record === undefined) return false;
      records.set(id(scope, key), { ...record, leaseUntilMs });
      return true;
    },
    async purgeExpired({ beforeMs, limit }) {
      await enter('purgeExpired');
      let count = 0;
      for (const [recordId, record] of records) {
        if (count < limit && record.expiresAtMs < beforeMs) {
          records.delete(recordId);
          count++;
        }
      }
      return count;
    },
  };

  return {
    store,
    records,
    calls,
    /** Make `operation` throw a fault, a limit error, or hang from now on; `undefined` heals it. */
    inject(operation: Operation, fault: Fault | undefined) {
      if (fault === undefined) faults.delete(operation);
      else faults.set(operation, fault);
    },
    /** Let every hung call go on. */
    resume() {
      for (const resolve of hung.splice(0)) resolve();
    },
    /** The single record of the store, for assertions. */
    only(): IdempotencyRecord | undefined {
      return [...records.values()][0];
    },
  };
}

/** A clock the test moves by hand. */
export function manualClock(startMs = Date.UTC(2030, 0, 1)) {
  let nowMs = startMs;
  return {
    nowMs: () => nowMs,
    advance(ms: number) {
      nowMs += ms;
    },
  };
}
