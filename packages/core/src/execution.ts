import type { IdempotencyEventListener, StoreOperation } from './events.js';
import type { FinalizationRule } from './finalization-rules.js';
import { type CapturedResponse, toStoredResponse } from './response.js';
import type { Clock, IdempotencyStore, StoredResponse } from './types.js';

/** Identifies the request for the host's hooks. */
export interface RecordContext {
  readonly scope: string;
  readonly key: string;
}

/** How an execution ended. */
export type FinishOutcome = 'finalized' | 'released' | 'lease-lost' | 'store-error' | 'already-settled';

/**
 * A reserved request: run the handler, then `finish` (or `abort` if it threw or the client left).
 * Call its methods on the object (`execution.finish(…)`), do not detach them.
 */
export interface Execution {
  readonly scope: string;
  readonly key: string;
  readonly fingerprint: string;
  /** The reservation's owner token; pass it to a transactional finalize. */
  readonly owner: string;
  /** `true` when this execution took over a reservation whose lease had lapsed. */
  readonly tookOver: boolean;
  /** Aborted when the reservation is lost (the heartbeat found another owner). */
  readonly signal: AbortSignal;
  /**
   * The response as it would be stored, or `undefined` when the finalization rule releases this status.
   * For hosts that finalize inside their own transaction.
   */
  prepare(response: CapturedResponse): StoredResponse | undefined;
  /** Tell the coordinator the host finalized the record itself (in its transaction), so it does not again. */
  markFinalized(status: number): void;
  /** Apply the finalization rule: store the response, or release the key. Never throws. */
  finish(response: CapturedResponse): Promise<FinishOutcome>;
  /** Release the key (handler threw, client aborted). Never throws. */
  abort(): Promise<void>;
}

/** What an execution needs from its coordinator. */
export interface ExecutionRuntime {
  readonly store: IdempotencyStore;
  readonly clock: Clock;
  readonly leaseMs: number;
  /** Renews the leases of running executions; undefined when the heartbeat is off. */
  readonly heartbeat: HeartbeatScheduler | undefined;
  readonly rule: FinalizationRule;
  readonly allowHeaders: ReadonlySet<string>;
  readonly maxBodyBytes: number;
  readonly redact: ((response: StoredResponse, context: RecordContext) => StoredResponse) | undefined;
  readonly emit: IdempotencyEventListener;
  /** Run a store call under the coordinator's timeout; throws StoreUnavailableError on a fault. */
  callStore<T>(
    operation: StoreOperation,
    ref: RecordContext,
    run: () => Promise<T>,
  ): Promise<{ value: T; durationMs: number }>;
}

// A class rather than a closure-built object: one request allocates one object with its methods on the
// prototype, which matters on the hot path of every covered request.
export class ReservedExecution implements Execution {
  readonly scope: string;
  readonly key: string;
  readonly fingerprint: string;
  readonly owner: string;
  readonly tookOver: boolean;
  readonly #runtime: ExecutionRuntime;
  #controller: AbortController | undefined;
  #settled = false;
  /** When the lease was last set, on the monotonic clock (ms); read by the heartbeat. */
  renewedAtMs = performance.now();

  constructor(
    runtime: ExecutionRuntime,
    ref: RecordContext,
    fingerprint: string,
    owner: string,
    tookOver: boolean,
  ) {
    this.#runtime = runtime;
    this.scope = ref.scope;
    this.key = ref.key;
    this.fingerprint = fingerprint;
    this.owner = owner;
    this.tookOver = tookOver;
    runtime.heartbeat?.add(this);
  }

  get signal(): AbortSignal {
    // Created on first use: most handlers never look at it.
    this.#controller ??= new AbortController();
    return this.#controller.signal;
  }

  prepare(response: CapturedResponse): StoredResponse | undefined {
    const runtime = this.#runtime;
    if (runtime.rule(response.status) === 'release') return undefined;
    const stored = toStoredResponse(response, runtime);
    return runtime.redact ? runtime.redact(stored, this) : stored;
  }

  markFinalized(status: number): void {
    if (this.#settle()) {
      this.#runtime.emit({
        type: 'finalized',
        scope: this.scope,
        key: this.key,
        status,
        external: true,
        durationMs: 0,
      });
    }
  }

  async finish(response: CapturedResponse): Promise<FinishOutcome> {
    if (!this.#settle()) return 'already-settled';
    const stored = this.prepare(response);
    if (stored === undefined) return this.#release('status', response.status);
    const { store, clock, emit } = this.#runtime;
    try {
      const { value: finalized, durationMs } = await this.#runtime.callStore('finalize', this, () =>
        store.finalize({
          scope: this.scope,
          key: this.key,
          owner: this.owner,
          response: stored,
          nowMs: clock.nowMs(),
        }),
      );
      if (!finalized) {
        emit({ type: 'lease-lost', scope: this.scope, key: this.key, phase: 'finalize', durationMs });
        return 'lease-lost';
      }
      emit({
        type: 'finalized',
        scope: this.scope,
        key: this.key,
        status: stored.status,
        external: false,
        durationMs,
      });
      return 'finalized';
    } catch {
      return 'store-error'; // already reported as a store-error event
    }
  }

  async abort(): Promise<void> {
    if (this.#settle()) await this.#release('aborted');
  }

  #settle(): boolean {
    if (this.#settled) return false;
    this.#settled = true;
    this.#runtime.heartbeat?.remove(this);
    return true;
  }

  async #release(reason: 'status' | 'aborted', status?: number): Promise<FinishOutcome> {
    const { store, emit } = this.#runtime;
    try {
      const { durationMs } = await this.#runtime.callStore('release', this, () =>
        store.release({ scope: this.scope, key: this.key, owner: this.owner }),
      );
      emit({
        type: 'released',
        scope: this.scope,
        key: this.key,
        reason,
        durationMs,
        ...(status === undefined ? {} : { status }),
      });
      return 'released';
    } catch {
      return 'store-error';
    }
  }

  #renewing = false;

  /** Renew the lease (called by the heartbeat). A lost reservation aborts `signal`. */
  beat(): void {
    if (this.#renewing || this.#settled) return;
    this.#renewing = true;
    this.renewedAtMs = performance.now();
    const { store, clock, leaseMs, emit } = this.#runtime;
    this.#runtime
      .callStore('renewLease', this, () =>
        store.renewLease({
          scope: this.scope,
          key: this.key,
          owner: this.owner,
          leaseUntilMs: clock.nowMs() + leaseMs,
        }),
      )
      .then(
        ({ value: renewed, durationMs }) => {
          this.#renewing = false;
          if (renewed || this.#settled) return;
          this.#runtime.heartbeat?.remove(this);
          emit({ type: 'lease-lost', scope: this.scope, key: this.key, phase: 'heartbeat', durationMs });
          this.#controller ??= new AbortController();
          this.#controller.abort(new Error('the idempotency reservation was lost'));
        },
        () => {
          this.#renewing = false; // reported as a store-error event; the next beat tries again
        },
      );
  }
}

/**
 * One timer for every running execution of a coordinator, instead of one per request: it ticks every half
 * interval while anything runs, and renews each execution whose lease was last set an interval ago or more.
 * (With the default lease of three intervals, a lease is renewed at the latest 1.5 intervals after it was
 * set, well before it lapses.)
 */
export class HeartbeatScheduler {
  readonly #intervalMs: number;
  readonly #running = new Set<ReservedExecution>();
  #timer: NodeJS.Timeout | undefined;

  constructor(intervalMs: number) {
    this.#intervalMs = intervalMs;
  }

  add(execution: ReservedExecution): void {
    this.#running.add(execution);
    if (this.#timer === undefined) {
      this.#timer = setInterval(() => this.#tick(), this.#intervalMs / 2);
      this.#timer.unref();
    }
  }

  remove(execution: ReservedExecution): void {
    this.#running.delete(execution);
    if (this.#running.size === 0) {
      clearInterval(this.#timer);
      this.#timer = undefined;
    }
  }

  #tick(): void {
    const dueMs = performance.now() - this.#intervalMs;
    for (const execution of this.#running) {
      if (execution.renewedAtMs <= dueMs) execution.beat();
    }
  }
}
