import { isStoreLimitError } from './errors.js';
import type { IdempotencyEventListener, StoreOperation } from './events.js';
import {
  defaultFinalizationRule,
  type FinalizationAction,
  type FinalizationRule,
} from './finalization-rules.js';
import { type CapturedResponse, toStoredResponse } from './response.js';
import type { Clock, IdempotencyStore, StoredResponse } from './types.js';

/** Identifies the request for the host's hooks. */
export interface RecordContext {
  readonly scope: string;
  readonly key: string;
}

/**
 * How an execution ended: `finalized` (stored for replay), `released` (the key is free again), `lease-lost`
 * (another request owns the key now; nothing was changed), `store-error` (the store failed; the key stays in
 * flight until its lease lapses), `already-settled` (finished, aborted or marked finalized before).
 */
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
  /** The largest body stored for replay, in bytes: the coordinator's cap within the store's limits. */
  readonly maxBodyBytes: number;
  /**
   * The response as it would be stored, or `undefined` when the finalization rule releases this status.
   * For hosts that finalize inside their own transaction. Never throws: a throwing rule is replaced by the
   * default rule, and a throwing `redact` by a record of the status alone (body omitted, no headers).
   */
  prepare(response: CapturedResponse): StoredResponse | undefined;
  /** Tell the coordinator the host finalized the record itself (in its transaction), so it does not again. */
  markFinalized(status: number): void;
  /** Apply the finalization rule: store the response, or release the key. Never throws. */
  finish(response: CapturedResponse): Promise<FinishOutcome>;
  /** Release the key: the handler threw, or the client left before it started. Never throws. */
  abort(): Promise<void>;
  /**
   * The client went away while the handler runs: stop renewing the lease. The reservation stays, so the
   * handler's answer is still stored when it comes within the lease; a handler that never answers frees the
   * key when the lease lapses instead of holding it for nobody.
   */
  clientGone(): void;
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
  /** The coordinator's body cap within the store's declared limits. */
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

  get maxBodyBytes(): number {
    return this.#runtime.maxBodyBytes;
  }

  prepare(response: CapturedResponse): StoredResponse | undefined {
    const runtime = this.#runtime;
    if (this.#decide(response.status) === 'release') return undefined;
    const stored = toStoredResponse(response, runtime);
    if (runtime.redact === undefined) return stored;
    try {
      return runtime.redact(stored, this);
    } catch (error) {
      // What redact was to remove cannot be told apart from the rest: keep the status alone, which is what a
      // retry needs to know (the request ran), and nothing that could hold a secret.
      this.#hookFailed('redact', error);
      return { status: stored.status, headers: {}, body: null, bodyOmitted: true };
    }
  }

  #decide(status: number): FinalizationAction {
    try {
      return this.#runtime.rule(status);
    } catch (error) {
      this.#hookFailed('finalizationRule', error);
      return defaultFinalizationRule(status);
    }
  }

  #hookFailed(hook: 'finalizationRule' | 'redact', error: unknown): void {
    this.#runtime.emit({ type: 'hook-error', hook, error, scope: this.scope, key: this.key });
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
    } catch (error) {
      // A response the store cannot hold: free the key, so the retry executes, rather than leave it blocked
      // until the lease lapses. A fault was already reported as a store-error event.
      return isStoreLimitError(error) ? this.#release('unstorable', stored.status) : 'store-error';
    }
  }

  async abort(): Promise<void> {
    if (this.#settle()) await this.#release('aborted');
  }

  clientGone(): void {
    this.#runtime.heartbeat?.remove(this);
  }

  #settle(): boolean {
    if (this.#settled) return false;
    this.#settled = true;
    this.#runtime.heartbeat?.remove(this);
    return true;
  }

  async #release(reason: 'status' | 'aborted' | 'unstorable', status?: number): Promise<FinishOutcome> {
    const { store, emit } = this.#runtime;
    try {
      const { value: released, durationMs } = await this.#runtime.callStore('release', this, () =>
        store.release({ scope: this.scope, key: this.key, owner: this.owner }),
      );
      if (!released) {
        emit({ type: 'lease-lost', scope: this.scope, key: this.key, phase: 'release', durationMs });
        return 'lease-lost';
      }
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
