/** Which store call an event is about. */
export type StoreOperation = 'reserve' | 'load' | 'finalize' | 'release' | 'renewLease' | 'purgeExpired';

/** What every event about one request's key carries. Never a body, a resolved path or a credential. */
interface KeyEvent {
  readonly scope: string;
  readonly key: string;
  /** How long the store work behind this event took, in ms. */
  readonly durationMs: number;
  /** The request's method, as the adapter passed it (a covered method). */
  readonly method: string;
  /** The route template (`/v1/namespaces/:namespace`), never the resolved path. */
  readonly route: string;
}

/** A decision `begin` took for a request (execute, replay, or an answer of its own). */
interface DecisionEvent extends KeyEvent {
  /** Since `begin` was called, in ms: key parsing, fingerprint, store calls and any wait. */
  readonly elapsedMs: number;
}

/** How an execution ended, or lost its reservation. */
interface ExecutionEvent extends KeyEvent {
  /**
   * The reservation's owner token: it tells one execution's events from another's (a `reserved` event and the
   * one that settles it carry the same). Not a credential, but nothing to show a client either.
   */
  readonly owner: string;
  /** Since the key was reserved, in ms: the handler's time and this event's store work. */
  readonly executionMs: number;
}

/**
 * What the coordinator and the purge scheduler report, for logs and metrics. Listeners run synchronously;
 * an exception thrown by one is swallowed, never the request's problem.
 */
export type IdempotencyEvent =
  | (DecisionEvent & { readonly type: 'reserved'; readonly tookOver: boolean; readonly owner: string })
  | (DecisionEvent & { readonly type: 'replayed'; readonly status: number })
  | (DecisionEvent & {
      readonly type: 'conflict';
      readonly waited: boolean;
      /** The status of the coordinator's answer (409, or 503 after a wait that ran out). */
      readonly status: number;
    })
  | (DecisionEvent & {
      readonly type: 'mismatch';
      /** The status of the coordinator's answer (422 by default). */
      readonly status: number;
    })
  | (ExecutionEvent & {
      readonly type: 'finalized';
      readonly status: number;
      readonly external: boolean;
      /**
       * What the store could not hold and was left out, so that the rest (the status always) is replayed: the
       * replay then says `idempotent-replay-body-omitted` and/or `idempotent-replay-headers-omitted`.
       */
      readonly omitted?: 'body' | 'headers' | 'body-and-headers';
    })
  | (ExecutionEvent & {
      readonly type: 'released';
      /**
       * `status`: the finalization rule released this status; `aborted`: the handler threw or the client left
       * before a status; `unstorable`: the store cannot hold this response (a {@link IdemStoreLimitError}).
       */
      readonly reason: 'status' | 'aborted' | 'unstorable';
      readonly status?: number;
    })
  | (ExecutionEvent & {
      /** The host held the key in flight (`execution.hold`): the outcome of its work is unknown. */
      readonly type: 'held';
      readonly reason: string;
    })
  | (ExecutionEvent & {
      readonly type: 'lease-lost';
      readonly phase: 'heartbeat' | 'finalize' | 'release';
      /** The handler's status, when it had one (`finalize`, `release`). */
      readonly status?: number;
    })
  | {
      /** A value the store cannot hold; the request was answered with a 4xx, or its key released. */
      readonly type: 'store-limit';
      readonly operation: StoreOperation;
      readonly error: unknown;
      readonly scope: string;
      readonly key: string;
      readonly method?: string;
      readonly route?: string;
      /** The execution's owner token, when the refused call was an execution's (a `finalize`). */
      readonly owner?: string | undefined;
      /** The status of the coordinator's answer, when this refusal decided it (a `reserve`). */
      readonly status?: number;
    }
  | {
      /** A host hook threw; the coordinator went on without it (see `hook` for what it did instead). */
      readonly type: 'hook-error';
      readonly hook: 'finalizationRule' | 'redact' | 'rebuildReplay';
      readonly error: unknown;
      readonly scope: string;
      readonly key: string;
      readonly method: string;
      readonly route: string;
    }
  | {
      readonly type: 'store-error';
      readonly operation: StoreOperation;
      readonly error: unknown;
      readonly durationMs: number;
      /** `true` when the request went on without a record (fail-open). */
      readonly failedOpen: boolean;
      readonly scope?: string;
      readonly key?: string;
      readonly method?: string;
      readonly route?: string;
      /** The execution's owner token, when the failed call was an execution's (`finalize`, `release`, `renewLease`). */
      readonly owner?: string | undefined;
      /** The status of the coordinator's answer, when this failure decided it (a `reserve` failing closed). */
      readonly status?: number;
    }
  | {
      /**
       * A store dropped a completed record before its lifetime ended, to stay within its bounds (the memory
       * store's `maxEntries` / `maxSizeBytes`): a retry of that key executes again.
       */
      readonly type: 'evicted';
      readonly scope: string;
      readonly key: string;
      readonly reason: 'capacity';
    }
  | {
      /**
       * A replay cache in front of a store (`withReplayCache` in `@idem/store-memory`) answered a `reserve` or
       * `load` from memory (`hit`, no round trip) or passed it to the store (`miss`).
       */
      readonly type: 'cache';
      readonly outcome: 'hit' | 'miss';
      readonly operation: 'reserve' | 'load';
      readonly scope: string;
      readonly key: string;
    }
  | {
      readonly type: 'purged';
      /** Records deleted by this run. */
      readonly count: number;
      readonly batches: number;
      readonly durationMs: number;
    };

export type IdempotencyEventListener = (event: IdempotencyEvent) => void;

/** One listener, several (metrics, traces, an audit log), or none. */
export type IdempotencyEventListeners = IdempotencyEventListener | readonly IdempotencyEventListener[];

/** The emitter when nobody listens: callers check {@link hasListeners} before they build an event. */
const nobody: IdempotencyEventListener = () => {};

/** `false` when `emit` (from {@link safeListener}) reaches no listener: building an event is wasted work then. */
export const hasListeners = (emit: IdempotencyEventListener): boolean => emit !== nobody;

/**
 * One emitter over any number of listeners, each isolated: an exception (or a rejected promise, from an
 * `async` listener) is swallowed and never stops the next listener or the request. Listeners run
 * synchronously, in order, on the request's path: keep them cheap (count, buffer, hand off).
 */
export function safeListener(listeners: IdempotencyEventListeners | undefined): IdempotencyEventListener {
  const all = (Array.isArray(listeners) ? listeners : [listeners]).filter(
    (listener): listener is IdempotencyEventListener => typeof listener === 'function',
  );
  if (all.length === 0) return nobody;
  if (all.length === 1) {
    const [only] = all as [IdempotencyEventListener];
    return (event) => notify(only, event);
  }
  return (event) => {
    for (const listener of all) notify(listener, event);
  };
}

function notify(listener: IdempotencyEventListener, event: IdempotencyEvent): void {
  try {
    const result: unknown = listener(event);
    // An async listener that rejects would otherwise be an unhandled rejection, which ends the process.
    if (typeof (result as PromiseLike<unknown> | undefined)?.then === 'function') {
      (result as PromiseLike<unknown>).then(undefined, () => {});
    }
  } catch {
    // A broken metrics hook must not fail a request.
  }
}
