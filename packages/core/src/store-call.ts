import { classifyStoreFailure, storeLimitError } from './decision.js';
import { type IdemStoreLimitError, IdemStoreUnavailableError } from './errors.js';
import { hasListeners, type IdempotencyEventListener, type StoreOperation } from './events.js';
import type { MaybePromise } from './types.js';

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
 * after the call timed out, so that the caller can undo its effect. `durationMs` is measured only when the
 * coordinator has event listeners (it is 0 otherwise): it is there for events. A store that answered
 * synchronously is answered with the value itself; a failure is always a rejected promise, never a throw.
 */
export type StoreCall = <T, A = undefined>(
  operation: StoreOperation,
  ref: CallRef,
  run: (arg: A) => MaybePromise<T>,
  onLateResult?: (value: T, arg: A) => void,
  arg?: A,
) => MaybePromise<{ readonly value: T; readonly durationMs: number }>;

/**
 * `true` for a thenable (a promise, or a store's lazy query): what a store method answered later, not now. Its
 * `then` is read once here; it is called only when the thenable is adopted.
 */
export function isThenable<T>(value: MaybePromise<T>): value is PromiseLike<T> {
  return (
    value !== null &&
    (typeof value === 'object' || typeof value === 'function') &&
    typeof (value as { then?: unknown }).then === 'function'
  );
}

/** How a timed call ended: its value, or the error it failed with (a timeout included). */
export type Timed<T> =
  | { readonly ok: true; readonly value: T; readonly durationMs: number }
  | { readonly ok: false; readonly error: unknown; readonly durationMs: number };

/** The store calls of one coordinator: one deadline queue, one way to report a failure. */
export interface StoreCalls {
  /**
   * A call under the deadline; a failure comes back as a value, unreported (the caller decides on it). A store
   * that answered synchronously is answered synchronously (no deadline, no promise).
   */
  timed<T, A = undefined>(
    operation: StoreOperation,
    run: (arg: A) => MaybePromise<T>,
    onLateResult?: (value: T, arg: A) => void,
    arg?: A,
  ): Timed<T> | Promise<Timed<T>>;
  /** A call under the deadline whose failure is reported and thrown (see {@link StoreCall}). */
  readonly call: StoreCall;
  /**
   * Report a failed call as its event: `store-limit` for a value the store refused, `store-error` for a fault.
   * For a failure that decides the request's answer (a reserve): its `status`, or `failedOpen`.
   */
  reportFailure(
    operation: StoreOperation,
    error: unknown,
    ref: CallRef,
    durationMs: number,
    answer?: { readonly status?: number; readonly failedOpen?: boolean },
  ): void;
  /** The error a failed call is thrown as: an {@link IdemStoreLimitError} or an {@link IdemStoreUnavailableError}. */
  errorOf(operation: StoreOperation, error: unknown): IdemStoreLimitError | IdemStoreUnavailableError;
}

export interface StoreCallOptions {
  /** The deadline queue of the calls: one per timeout, shared by the coordinators that have that timeout. */
  readonly deadlines: Deadlines;
  readonly emit: IdempotencyEventListener;
  readonly unavailableStatus: number;
  readonly limitStatus: number;
  readonly retryAfterSeconds: number;
}

export class StoreTimeoutError extends Error {
  constructor(operation: StoreOperation, timeoutMs: number) {
    super(`store ${operation} did not answer within ${timeoutMs} ms`);
    this.name = 'StoreTimeoutError';
  }
}

/** A store call in flight: rejected with a timeout if it has not settled by its deadline. */
interface Watched {
  readonly deadlineMs: number;
  readonly operation: StoreOperation;
  /** Cleared once the call settles, so that nothing it answered is kept until the deadline. */
  reject: ((error: Error) => void) | undefined;
}

/**
 * The deadlines of one coordinator's store calls, on a single timer. The calls share one timeout, so their
 * deadlines come in the order they started: a queue, and a timer armed for its oldest entry, instead of a
 * timer set and cleared around every call (which costs more than a fast store's answer). Unref'd: a pending
 * call does not hold the process.
 */
export class Deadlines {
  readonly #timeoutMs: number;
  #queue: Watched[] = [];
  #head = 0;
  #timer: NodeJS.Timeout | undefined;
  #armedForMs = 0;

  constructor(timeoutMs: number) {
    this.#timeoutMs = timeoutMs;
  }

  /** `call`, or a {@link StoreTimeoutError} if it has not settled by the deadline. */
  race<T>(operation: StoreOperation, call: Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const watched = this.watch(operation, reject);
      call.then(
        (value) => {
          watched.reject = undefined;
          resolve(value);
        },
        (error: unknown) => {
          watched.reject = undefined;
          reject(error);
        },
      );
    });
  }

  watch(operation: StoreOperation, reject: (error: Error) => void): Watched {
    const entry: Watched = { deadlineMs: performance.now() + this.#timeoutMs, operation, reject };
    // Calls that settled leave the front as new ones come: the queue holds about what is in flight.
    const queue = this.#queue;
    while (this.#head < queue.length && (queue[this.#head] as Watched).reject === undefined) this.#head++;
    if (this.#head > 1_024 && this.#head * 2 > queue.length) {
      this.#queue = queue.slice(this.#head);
      this.#head = 0;
    }
    this.#queue.push(entry);
    if (this.#timer === undefined) this.#arm(entry.deadlineMs, this.#timeoutMs);
    return entry;
  }

  #arm(deadlineMs: number, delayMs: number): void {
    this.#armedForMs = deadlineMs;
    this.#timer = setTimeout(() => this.#expire(), Math.max(1, Math.ceil(delayMs)));
    this.#timer.unref();
  }

  #expire(): void {
    this.#timer = undefined;
    // At least the entry the timer was armed for is due, whatever the clock says (a test's fake timers).
    const nowMs = Math.max(performance.now(), this.#armedForMs);
    const queue = this.#queue;
    let head = this.#head;
    for (; head < queue.length; head++) {
      const entry = queue[head] as Watched;
      if (entry.reject === undefined) continue; // settled in time
      if (entry.deadlineMs > nowMs) break;
      const reject = entry.reject;
      entry.reject = undefined;
      reject(new StoreTimeoutError(entry.operation, this.#timeoutMs));
    }
    // Drop what is done: the rest is still in flight (or settled, and skipped next time).
    this.#queue = head === queue.length ? [] : queue.slice(head);
    this.#head = 0;
    const next = this.#queue[0];
    if (next !== undefined) this.#arm(next.deadlineMs, next.deadlineMs - nowMs);
  }
}

export function storeCalls(options: StoreCallOptions): StoreCalls {
  const { deadlines, emit } = options;
  // Durations are for events: without a listener, the clock is not read.
  const timedEvents = hasListeners(emit);

  // `run` is called with `arg` (and `onLateResult` with it too), so that a hot caller passes functions made once
  // and its parameters, rather than closures made per call.
  function timed<T, A = undefined>(
    operation: StoreOperation,
    run: (arg: A) => MaybePromise<T>,
    onLateResult?: (value: T, arg: A) => void,
    arg?: A,
  ): Timed<T> | Promise<Timed<T>> {
    const startedMs = timedEvents ? performance.now() : 0;
    let result: MaybePromise<T>;
    try {
      result = run(arg as A);
    } catch (error) {
      // A store that throws synchronously is still a store fault.
      return { ok: false, error, durationMs: performance.now() - startedMs };
    }
    // A store that answers synchronously (memory, a cache hit) needs no deadline and no promise.
    if (!isThenable(result)) {
      return { ok: true, value: result, durationMs: timedEvents ? performance.now() - startedMs : 0 };
    }
    return settle(
      operation,
      result,
      startedMs,
      onLateResult === undefined ? undefined : (value: T) => onLateResult(value, arg as A),
    );
  }

  /** The thenable a store answered with, adopted once and held to the deadline. */
  async function settle<T>(
    operation: StoreOperation,
    result: PromiseLike<T>,
    startedMs: number,
    onLateResult: (value: T) => void = () => {},
  ): Promise<Timed<T>> {
    let call: Promise<T>;
    try {
      // Adopted once: a store may hand back a lazy thenable (a query builder that runs on each `then`), and this
      // function looks at the call twice.
      call = Promise.resolve(result);
    } catch (error) {
      call = Promise.reject(error); // a thenable whose `then` getter throws is a store fault too
    }
    try {
      // An in-process store (memory, a cache hit) has answered by the next microtask: then no deadline is
      // watched at all. Anything slower is raced against its deadline.
      let settled = false;
      const mark = () => {
        settled = true;
      };
      call.then(mark, mark);
      await undefined;
      const value = settled ? await call : await deadlines.race(operation, call);
      return { ok: true, value, durationMs: timedEvents ? performance.now() - startedMs : 0 };
    } catch (error) {
      // The call may still succeed after we gave up on it; let the caller undo its effect then.
      if (error instanceof StoreTimeoutError) call.then(onLateResult, () => {});
      return { ok: false, error, durationMs: performance.now() - startedMs };
    }
  }

  function reportFailure(
    operation: StoreOperation,
    error: unknown,
    ref: CallRef,
    durationMs: number,
    answer: { readonly status?: number; readonly failedOpen?: boolean } = {},
  ): void {
    const { scope, key, method, route, owner } = ref;
    const { status, failedOpen = false } = answer;
    const withStatus = status === undefined ? {} : { status };
    if (classifyStoreFailure(error) === 'limit') {
      // Not a fault: the same request can never be stored, so retrying it must not look worth it.
      const withOwner = owner === undefined ? {} : { owner };
      emit({ type: 'store-limit', operation, error, scope, key, method, route, ...withOwner, ...withStatus });
      return;
    }
    emit({
      type: 'store-error',
      operation,
      error,
      durationMs,
      failedOpen,
      scope,
      key,
      method,
      route,
      owner,
      ...withStatus,
    });
  }

  function errorOf(
    operation: StoreOperation,
    error: unknown,
  ): IdemStoreLimitError | IdemStoreUnavailableError {
    if (classifyStoreFailure(error) === 'limit') return storeLimitError(error as Error, options.limitStatus);
    return new IdemStoreUnavailableError(`the idempotency store is unavailable (${operation})`, {
      cause: error,
      status: options.unavailableStatus,
      retryAfterSeconds: options.retryAfterSeconds,
    });
  }

  /** A failed call, reported, as the error it is thrown as. */
  const failed = (operation: StoreOperation, ref: CallRef, done: Timed<unknown> & { ok: false }) => {
    reportFailure(operation, done.error, ref, done.durationMs);
    return errorOf(operation, done.error);
  };

  const call: StoreCall = (operation, ref, run, onLateResult, arg) => {
    const done = timed(operation, run, onLateResult, arg);
    if (!isThenable(done)) return done.ok ? done : Promise.reject(failed(operation, ref, done));
    return done.then((settled) => {
      if (settled.ok) return settled;
      throw failed(operation, ref, settled);
    });
  };

  return { timed, call, reportFailure, errorOf };
}
