import type { IdempotencyStore, LeasedExecution } from '@idem/core';
import { retryLater } from '../catalog/iceberg-error.js';
import { type Deadline, within } from '../database/deadline.js';

/**
 * What a mutation needs of the store when its key is held under a lease (a store other than the catalog's own
 * database): the owner fence before its commit, and a way to leave its key in flight when the commit's outcome
 * is unknown.
 */
export interface LeaseControl {
  /**
   * Renew the lease of `execution`, owner-fenced, just before the catalog commits its work: resolves when the key
   * is still this request's (and now stays so for a whole lease), throws a retryable 503 when another request
   * took it over after the lease lapsed, or the store did not answer in time. Nothing is committed then.
   */
  confirm(execution: LeasedExecution, deadline: Deadline): Promise<void>;
  /**
   * The catalog's commit of `execution`'s work did not answer: it may have committed. The key must not be freed
   * (a retry would run the work a second time at once), so its release is refused: the key stays in flight until
   * its lease lapses, as after a node that died between its commit and its finalize.
   */
  keepInFlight(execution: LeasedExecution, why: Error): void;
}

export interface LeasedStore {
  /** The store to hand to the coordinator: `store` whose release of a key kept in flight fails with why. */
  readonly store: IdempotencyStore;
  readonly control: LeaseControl;
}

/**
 * The lease fence around the catalog's transaction. Times are this node's clock, as the coordinator's are:
 * nodes whose clocks differ by more than a lease can take a live key over (keep them in step, NTP).
 */
export function leasedStore(
  store: IdempotencyStore,
  options: { readonly leaseMs: number; readonly storeTimeoutMs: number },
): LeasedStore {
  /** Owners whose key stays in flight, and why: the next release of each fails with it. */
  const kept = new Map<string, Error>();
  const wrapped = new Proxy(store, {
    get(target, property, receiver) {
      const value: unknown = Reflect.get(target, property, receiver);
      if (property !== 'release' || typeof value !== 'function') return value;
      return async (params: Parameters<IdempotencyStore['release']>[0]) => {
        const why = kept.get(params.owner);
        if (why === undefined) return value.call(target, params);
        kept.delete(params.owner);
        // A failed release is what core reads as "the key stays in flight until its lease lapses": it reports
        // a store-error event (the audit line, the metric) carrying why, and releases nothing.
        throw why;
      };
    },
  });
  return {
    store: wrapped,
    control: {
      async confirm(execution, deadline) {
        const { scope, key, owner } = execution;
        const renewed = await within(
          options.storeTimeoutMs,
          "the idempotency store's renewLease",
          () => store.renewLease({ scope, key, owner, leaseUntilMs: Date.now() + options.leaseMs }),
          deadline,
        ).catch(() => {
          throw retryLater(
            'the idempotency store did not confirm that this request still holds its key; nothing was committed; retry with the same key',
          );
        });
        if (!renewed)
          throw retryLater('the idempotency reservation was lost before commit; retry with the same key');
      },
      keepInFlight(execution, why) {
        kept.set(execution.owner, why);
      },
    },
  };
}
