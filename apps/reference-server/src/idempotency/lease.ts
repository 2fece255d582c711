import type { IdempotencyStore, LeasedExecution } from '@idem/core';
import { retryLater } from '../catalog/iceberg-error.js';
import { type Deadline, within } from '../database/deadline.js';

/**
 * What a mutation needs of the store when its key is held under a lease (a store other than the catalog's own
 * database): the owner fence before its commit. (A commit whose outcome is unknown holds its key in flight
 * with `execution.hold`.)
 */
export interface LeaseControl {
  /**
   * Renew the lease of `execution`, owner-fenced, just before the catalog commits its work: resolves when the key
   * is still this request's (and now stays so for a whole lease), throws a retryable 503 when another request
   * took it over after the lease lapsed, or the store did not answer in time. Nothing is committed then.
   */
  confirm(execution: LeasedExecution, deadline: Deadline): Promise<void>;
}

/**
 * The lease fence around the catalog's transaction. Times are this node's clock, as the coordinator's are:
 * nodes whose clocks differ by more than a lease can take a live key over (keep them in step, NTP).
 */
export function leaseFence(
  store: IdempotencyStore,
  options: { readonly leaseMs: number; readonly storeTimeoutMs: number },
): LeaseControl {
  return {
    async confirm(execution, deadline) {
      const { scope, key, owner } = execution;
      const renewed = await within(
        options.storeTimeoutMs,
        "the idempotency store's renewLease",
        async () => store.renewLease({ scope, key, owner, leaseUntilMs: Date.now() + options.leaseMs }),
        deadline,
      ).catch(() => {
        throw retryLater(
          'the idempotency store did not confirm that this request still holds its key; nothing was committed; retry with the same key',
        );
      });
      if (!renewed)
        throw retryLater('the idempotency reservation was lost before commit; retry with the same key');
    },
  };
}
