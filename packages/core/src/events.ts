/** Which store call an event is about. */
export type StoreOperation = 'reserve' | 'load' | 'finalize' | 'release' | 'renewLease' | 'purgeExpired';

interface KeyEvent {
  readonly scope: string;
  readonly key: string;
  /** How long the store work behind this event took, in ms. */
  readonly durationMs: number;
}

/**
 * What the coordinator and the purge scheduler report, for logs and metrics. Listeners run synchronously;
 * an exception thrown by one is swallowed, never the request's problem.
 */
export type IdempotencyEvent =
  | (KeyEvent & { readonly type: 'reserved'; readonly tookOver: boolean })
  | (KeyEvent & { readonly type: 'replayed'; readonly status: number })
  | (KeyEvent & { readonly type: 'conflict'; readonly waited: boolean })
  | (KeyEvent & { readonly type: 'mismatch' })
  | (KeyEvent & { readonly type: 'finalized'; readonly status: number; readonly external: boolean })
  | (KeyEvent & {
      readonly type: 'released';
      /**
       * `status`: the finalization rule released this status; `aborted`: the handler threw or the client left
       * before a status; `unstorable`: the store cannot hold this response (a {@link IdemStoreLimitError}).
       */
      readonly reason: 'status' | 'aborted' | 'unstorable';
      readonly status?: number;
    })
  | (KeyEvent & { readonly type: 'lease-lost'; readonly phase: 'heartbeat' | 'finalize' | 'release' })
  | {
      /** A value the store cannot hold; the request was answered with a 4xx, or its key released. */
      readonly type: 'store-limit';
      readonly operation: StoreOperation;
      readonly error: unknown;
      readonly scope: string;
      readonly key: string;
    }
  | {
      /** A host hook threw; the coordinator went on without it (see `hook` for what it did instead). */
      readonly type: 'hook-error';
      readonly hook: 'finalizationRule' | 'redact' | 'rebuildReplay';
      readonly error: unknown;
      readonly scope: string;
      readonly key: string;
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

/** Wrap a listener so that it can never throw into the caller. */
export function safeListener(listener: IdempotencyEventListener | undefined): IdempotencyEventListener {
  if (listener === undefined) {
    return () => {};
  }
  return (event) => {
    try {
      listener(event);
    } catch {
      // A broken metrics hook must not fail a request.
    }
  };
}
