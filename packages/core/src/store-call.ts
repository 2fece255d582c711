import { IdemStoreLimitError, IdemStoreUnavailableError, isStoreLimitError } from './errors.js';
import type { IdempotencyEventListener, StoreOperation } from './events.js';

/** Identifies the record a store call is about, and the request it is for, for events. */
export interface CallRef {
  readonly scope: string;
  readonly key: string;
  readonly method: string;
  readonly route: string;
  /** The execution's owner token, for an execution's calls. */
  readonly owner?: string;
}

/**
 * Run one store call under the coordinator's timeout. A fault (an exception, or no answer in time) becomes an
 * {@link IdemStoreUnavailableError} after a `store-error` event; a value the store refused becomes an
 * {@link IdemStoreLimitError} after a `store-limit` event. `onLateResult` receives a result that arrives
 * after the call timed out, so that the caller can undo its effect.
 */
export type StoreCall = <T>(
  operation: StoreOperation,
  ref: CallRef,
  run: () => Promise<T>,
  onLateResult?: (value: T) => void,
) => Promise<{ value: T; durationMs: number }>;

export interface StoreCallOptions {
  readonly timeoutMs: number;
  readonly emit: IdempotencyEventListener;
  /** Fail open: a failed reserve lets the request through (reported on the event). */
  readonly failOpen: boolean;
  readonly unavailableStatus: number;
  readonly limitStatus: number;
  readonly retryAfterSeconds: number;
}

class StoreTimeoutError extends Error {
  constructor(operation: StoreOperation, timeoutMs: number) {
    super(`store ${operation} did not answer within ${timeoutMs} ms`);
    this.name = 'StoreTimeoutError';
  }
}

export function storeCall(options: StoreCallOptions): StoreCall {
  const { timeoutMs, emit } = options;
  return async function callStore<T>(
    operation: StoreOperation,
    ref: CallRef,
    run: () => Promise<T>,
    onLateResult: (value: T) => void = () => {},
  ): Promise<{ value: T; durationMs: number }> {
    const startedMs = performance.now();
    let timer: NodeJS.Timeout | undefined;
    let call: Promise<T>;
    try {
      call = run();
    } catch (error) {
      call = Promise.reject(error); // a store that throws synchronously is still a store fault
    }
    try {
      const value = await new Promise<T>((resolve, reject) => {
        timer = setTimeout(() => reject(new StoreTimeoutError(operation, timeoutMs)), timeoutMs);
        call.then(resolve, reject);
      });
      return { value, durationMs: performance.now() - startedMs };
    } catch (error) {
      if (isStoreLimitError(error)) {
        // Not a fault: the same request can never be stored, so retrying it must not look worth it.
        emit({
          type: 'store-limit',
          operation,
          error,
          scope: ref.scope,
          key: ref.key,
          method: ref.method,
          route: ref.route,
          ...(operation === 'reserve' ? { status: options.limitStatus } : {}),
        });
        throw new IdemStoreLimitError(`the idempotency store cannot hold this request: ${error.message}`, {
          cause: error,
          status: options.limitStatus,
        });
      }
      if (error instanceof StoreTimeoutError) {
        // The call may still succeed after we gave up on it; let the caller undo its effect then.
        call.then(onLateResult, () => {});
      }
      emit({
        type: 'store-error',
        operation,
        error,
        durationMs: performance.now() - startedMs,
        failedOpen: options.failOpen && operation === 'reserve',
        scope: ref.scope,
        key: ref.key,
        method: ref.method,
        route: ref.route,
        owner: ref.owner,
        ...(operation === 'reserve' && !options.failOpen ? { status: options.unavailableStatus } : {}),
      });
      throw new IdemStoreUnavailableError(`the idempotency store is unavailable (${operation})`, {
        cause: error,
        status: options.unavailableStatus,
        retryAfterSeconds: options.retryAfterSeconds,
      });
    } finally {
      clearTimeout(timer);
    }
  };
}
