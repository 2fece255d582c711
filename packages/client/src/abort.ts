/** The reason an aborted signal carries, as fetch rejects with it (`null` and `0` included). */
export function abortReason(signal: AbortSignal): unknown {
  // Only a runtime without `reason` leaves it undefined: `abort()` without one sets an AbortError.
  return signal.reason !== undefined
    ? signal.reason
    : new DOMException('This operation was aborted', 'AbortError');
}

/** Wait `ms`, or reject with the signal's reason as soon as it aborts (the timer is cleared then). */
export function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  if (signal?.aborted) return Promise.reject(abortReason(signal));
  return new Promise((resolve, reject) => {
    const onAbort = () => {
      clearTimeout(timer);
      reject(abortReason(signal as AbortSignal));
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** Settle like `promise`, or reject with the signal's reason as soon as it aborts. */
export function raceAbort<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (signal === undefined) return promise;
  if (signal.aborted) return Promise.reject(abortReason(signal));
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(abortReason(signal));
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error);
      },
    );
  });
}

/** The signal of one attempt: the caller's, plus a timeout of its own when there is one. */
export interface AttemptSignal {
  readonly signal: AbortSignal | undefined;
  /** Whether this attempt's own timeout (not the caller) aborted it. */
  timedOut(): boolean;
  /** Stop the timeout once the answer's head is in; the caller's signal still reaches the body. */
  clearTimeout(): void;
}

/**
 * Make the signal of one attempt (or of reading its body, `what`). Without `timeoutMs`, it is the caller's
 * signal itself.
 */
export function attemptSignal(
  caller: AbortSignal | undefined,
  timeoutMs: number | undefined,
  what = 'The attempt',
): AttemptSignal {
  if (timeoutMs === undefined) return { signal: caller, timedOut: () => false, clearTimeout: () => {} };
  const own = new AbortController();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    own.abort(new DOMException(`${what} took longer than ${timeoutMs} ms`, 'TimeoutError'));
  }, timeoutMs);
  return {
    signal: caller === undefined ? own.signal : anySignal([caller, own.signal]),
    timedOut: () => timedOut,
    clearTimeout: () => clearTimeout(timer),
  };
}

/**
 * A signal aborted with the reason of the first of `signals` to abort. `AbortSignal.any` where the runtime has
 * it (it holds its sources weakly, so a long-lived caller signal does not collect one listener per call);
 * linked by hand elsewhere (Node 20.0 to 20.2).
 */
function anySignal(signals: readonly AbortSignal[]): AbortSignal {
  const any = (AbortSignal as { any?: (signals: AbortSignal[]) => AbortSignal }).any;
  if (typeof any === 'function') return any.call(AbortSignal, [...signals]);
  const controller = new AbortController();
  for (const signal of signals) {
    if (signal.aborted) {
      controller.abort(abortReason(signal));
      break;
    }
    signal.addEventListener('abort', () => controller.abort(abortReason(signal)), { once: true });
  }
  return controller.signal;
}
