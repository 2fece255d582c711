import { ErrorCode, type IdemError, isIdemError, isStoreLimitError } from './errors.js';
import { hasListeners, type IdempotencyEventListener } from './events.js';
import {
  defaultFinalizationRule,
  type FinalizationAction,
  type FinalizationRule,
} from './finalization-rules.js';
import type { HeartbeatScheduler, Renewable } from './heartbeat.js';
import {
  type CapturedResponse,
  type OmittedParts,
  type ReplayResponse,
  smallerResponses,
  toStoredResponse,
} from './response.js';
import type { StoreCall } from './store-call.js';
import type {
  Clock,
  FinalizeParams,
  IdempotencyRecord,
  IdempotencyStore,
  StoredResponse,
  TransactionalStore,
} from './types.js';

/**
 * The request a record belongs to, as the host's hooks (`redact`, `rebuildReplay`) receive it: its record
 * (scope, key), its identity (method, route template, resolved path) and whatever the adapter handed over as
 * `host` (Express's `req`, Fastify's `request`), so that a hook never has to unpack data from the scope.
 */
export interface RecordContext<Host = unknown> {
  readonly scope: string;
  readonly key: string;
  readonly method: string;
  /** The route template (`/v1/namespaces/:namespace`). */
  readonly route: string;
  /** The resolved path, when the adapter passed it. */
  readonly path: string | undefined;
  /** The framework's request, as the adapter passed it; `undefined` when calling the core directly. */
  readonly host: Host;
}

/**
 * How an execution ended: `finalized` (stored for replay), `released` (the key is free again), `lease-lost`
 * (another request owns the key now; nothing was changed), `store-error` (the store failed; the key stays in
 * flight until its lease lapses), `already-settled` (finished, aborted or marked finalized before).
 */
export type FinishOutcome =
  | 'finalized'
  | 'released'
  | 'lease-lost'
  | 'store-error'
  | 'already-settled'
  | 'not-reserved';

/**
 * What {@link Execution.reserveWith} found inside the host's transaction: `execute` (the key is reserved in
 * it: do the work, then `finalizeWith` in the same transaction), or the answer to send instead of running the
 * handler: the stored response (`replay`), or an error (`reject`: the key was used for another request, or
 * is held by a request of another node still in flight).
 */
export type TransactionalReservation =
  | { readonly action: 'execute' }
  | { readonly action: 'replay'; readonly response: ReplayResponse }
  | { readonly action: 'reject'; readonly error: IdemError };

/**
 * What {@link Execution.finalizeWith} did inside the host's transaction: `finalized` (the record is written
 * in it; commit), `lease-lost` (another request owns the key now; roll back, or the work is done twice), or
 * `not-stored` (the finalization rule releases this status: nothing was written; the key is released when
 * the response goes out).
 */
export type TransactionalOutcome = 'finalized' | 'lease-lost' | 'not-stored';

/**
 * A reserved request: run the handler, then `finish` (or `abort` if it threw or the client left).
 * Call its methods on the object (`execution.finish(…)`), do not detach them.
 */
export interface Execution<Host = unknown> extends RecordContext<Host> {
  readonly fingerprint: string;
  /** The reservation's owner token. */
  readonly owner: string;
  /** `true` when this execution took over a reservation whose lease had lapsed. */
  readonly tookOver: boolean;
  /** Aborted when the reservation is lost (the heartbeat found another owner). */
  readonly signal: AbortSignal;
  /** The largest body stored for replay, in bytes: the coordinator's cap within the store's limits. */
  readonly maxBodyBytes: number;
  /**
   * With `reserveIn: 'transaction'`: reserve the key inside the host's transaction, before its work. On
   * `execute` the host does its work and `finalizeWith` the same store; otherwise it sends the answer it gets
   * (a replay, or an error) and writes nothing. A fault of the store is thrown (the transaction fails with
   * it); a value the store cannot hold, or a duplicate still in flight when the store's lock wait ran out (it
   * throws an {@link IdemInProgressError}), comes back as a `reject`.
   */
  reserveWith(store: TransactionalStore): Promise<TransactionalReservation>;
  /**
   * Finalize inside the host's own transaction, so that its work and the record commit together: applies the
   * finalization rule, calls `finalize` with the record's parameters (the coordinator's clock, this owner),
   * and settles the execution. `finalize` is the store's transactional finalize, e.g.
   * `(params) => store.finalizeInTransaction(tx, params)`, or a {@link TransactionalStore}, which also
   * releases, in the transaction, a key that `reserveWith` reserved there when the rule does not store this
   * status. An exception from it is the host's to handle (its transaction rolls back). On `lease-lost` the
   * host MUST roll back.
   *
   * If the transaction then fails to commit, the host answers something else, and `finish` with that answer
   * releases the key.
   *
   * @example
   * await db.transaction(async (tx) => {
   *   const response = await work(tx);
   *   if ((await execution.finalizeWith(response, (p) => store.finalizeInTransaction(tx, p))) === 'lease-lost')
   *     throw new Error('lost the reservation: roll back');
   *   return response;
   * });
   */
  finalizeWith(
    response: CapturedResponse,
    finalize: ((params: FinalizeParams) => boolean | Promise<boolean>) | TransactionalStore,
  ): Promise<TransactionalOutcome>;
  /** Apply the finalization rule: store the response, or release the key. Never throws. */
  finish(response: CapturedResponse): Promise<FinishOutcome>;
  /** Release the key: the handler threw, or the client left before it started. Never throws. */
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
  /** The coordinator's body cap within the store's declared limits. */
  readonly maxBodyBytes: number;
  /** How long a new record is kept: lifetime plus grace (ms). */
  readonly lifetimeMs: number;
  /** The coordinator's answer to a record that is there already: 422, a replay, or undefined (in flight). */
  answerExisting(
    execution: ReservedExecution<unknown>,
    record: IdempotencyRecord,
    durationMs: number,
    startedMs: number,
  ): Promise<TransactionalReservation | undefined>;
  /** The coordinator's in-progress error (for a key held by a request still in flight elsewhere). */
  inProgress(): IdemError;
  /** The coordinator's store-limit error for a value the store refused. */
  limitError(error: IdemError): IdemError;
  /** No lease is renewed this long after its reservation (ms); undefined: as long as the handler runs. */
  readonly maxExecutionMs: number | undefined;
  // biome-ignore lint/suspicious/noExplicitAny: the host type is the coordinator's; executions pass themselves.
  readonly redact: ((response: StoredResponse, context: RecordContext<any>) => StoredResponse) | undefined;
  readonly emit: IdempotencyEventListener;
  readonly callStore: StoreCall;
}

/** The request an execution runs for: its identity, and the adapter's request object. */
export interface ExecutionRequest<Host> {
  readonly method: string;
  readonly route: string;
  readonly path: string | undefined;
  readonly host: Host;
}

/** A record the host finalized in its own transaction, not known to be committed yet. */
interface ExternalFinalize {
  readonly status: number;
  /** How long the store's finalize took, in ms. */
  readonly durationMs: number;
  /** What the store could not hold and was left out. */
  readonly omitted: OmittedParts | undefined;
  /** `finalize` threw: nothing was written, whatever the host answers. */
  readonly failed?: true;
}

/**
 * A response a store can take: a status, headers as an object, and the body as bytes or null. What a host's
 * `redact` returns is checked against it, or a store would fail on it as a fault (a `body: undefined`), and
 * the smaller records could not be built from it (no `headers`).
 */
function isStoredResponse(value: unknown): value is StoredResponse {
  if (typeof value !== 'object' || value === null) return false;
  const { status, headers, body } = value as Partial<StoredResponse>;
  return (
    typeof status === 'number' &&
    typeof headers === 'object' &&
    headers !== null &&
    !Array.isArray(headers) &&
    (body === null || body instanceof Uint8Array)
  );
}

// A class rather than a closure-built object: one request allocates one object with its methods on the
// prototype, which matters on the hot path of every covered request.
export class ReservedExecution<Host = unknown> implements Execution<Host>, Renewable {
  readonly scope: string;
  readonly key: string;
  readonly method: string;
  readonly route: string;
  readonly path: string | undefined;
  readonly host: Host;
  readonly fingerprint: string;
  readonly owner: string;
  readonly #runtime: ExecutionRuntime;
  #controller: AbortController | undefined;
  #settled = false;
  /** Reserved by the coordinator (`begin`), or left to the host's transaction (`pending` until reserved). */
  #state: 'reserved' | 'took-over' | 'pending';
  /** Reserved by `reserveWith`, in the host's transaction: no heartbeat, and the rollback releases it. */
  #inTransaction = false;
  /**
   * What the host finalized in its own transaction (its status, how long the store took, what was left out),
   * until `finish` sees the answer that went out and so knows whether it committed.
   */
  #storedExternally: ExternalFinalize | undefined;
  /** When the lease was last set, on the monotonic clock (ms); read by the heartbeat. */
  renewedAtMs = performance.now();
  readonly #reservedAtMs = this.renewedAtMs;

  constructor(
    runtime: ExecutionRuntime,
    ref: { readonly scope: string; readonly key: string },
    request: ExecutionRequest<Host>,
    fingerprint: string,
    owner: string,
    state: 'reserved' | 'took-over' | 'pending',
  ) {
    this.#runtime = runtime;
    this.scope = ref.scope;
    this.key = ref.key;
    this.method = request.method;
    this.route = request.route;
    this.path = request.path;
    this.host = request.host;
    this.fingerprint = fingerprint;
    this.owner = owner;
    this.#state = state;
    // A key the host reserves in its transaction is held by that transaction, not by a lease.
    if (state !== 'pending') runtime.heartbeat?.add(this);
  }

  get tookOver(): boolean {
    return this.#state === 'took-over';
  }

  async reserveWith(store: TransactionalStore): Promise<TransactionalReservation> {
    if (this.#state !== 'pending' || this.#settled) {
      throw new Error(
        'reserveWith: the key is reserved already (reserveIn is not "transaction", or it was called twice)',
      );
    }
    const runtime = this.#runtime;
    const nowMs = runtime.clock.nowMs();
    const startedMs = performance.now();
    let result: Awaited<ReturnType<TransactionalStore['reserve']>>;
    try {
      result = await store.reserve({
        scope: this.scope,
        key: this.key,
        fingerprint: this.fingerprint,
        owner: this.owner,
        nowMs,
        leaseUntilMs: nowMs + runtime.leaseMs,
        expiresAtMs: nowMs + runtime.lifetimeMs,
      });
    } catch (error) {
      return this.#refusedInTransaction(error, performance.now() - startedMs);
    }
    const durationMs = performance.now() - startedMs;
    if (result.outcome === 'reserved') {
      this.#state = result.tookOver ? 'took-over' : 'reserved';
      this.#inTransaction = true;
      if (this.#listening) {
        const { scope, key, method, route, owner } = this;
        const { tookOver } = result;
        runtime.emit({
          type: 'reserved',
          scope,
          key,
          method,
          route,
          owner,
          tookOver,
          durationMs,
          elapsedMs: durationMs,
        });
      }
      return { action: 'execute' };
    }
    this.#settled = true; // nothing of ours to finish: the answer is someone else's
    const answer = await runtime.answerExisting(
      this as ReservedExecution<unknown>,
      result.record,
      durationMs,
      startedMs,
    );
    if (answer !== undefined) return answer;
    // Held by a request still in flight, reserved outside any transaction (by a node with reserveIn 'begin'):
    // a transaction cannot wait on it without holding its own locks, so the client retries later.
    const refusal = runtime.inProgress();
    if (this.#listening) {
      const { scope, key, method, route } = this;
      const { status } = refusal;
      runtime.emit({
        type: 'conflict',
        scope,
        key,
        method,
        route,
        waited: false,
        status,
        durationMs,
        elapsedMs: durationMs,
      });
    }
    return { action: 'reject', error: refusal };
  }

  /**
   * `reserveWith`'s store threw. A concurrent holder that kept the row locked past the database's lock wait
   * ({@link IdemInProgressError}) is a duplicate in flight: the coordinator's in-progress answer. A value the
   * store cannot hold is its store-limit answer. Anything else is a fault, reported and rethrown so that the
   * host's transaction fails with it.
   */
  #refusedInTransaction(error: unknown, durationMs: number): TransactionalReservation {
    const runtime = this.#runtime;
    const { scope, key, method, route, owner } = this;
    if (isIdemError(error) && error.code === ErrorCode.InProgress) {
      this.#settled = true;
      const refusal = runtime.inProgress();
      if (this.#listening) {
        const { status } = refusal;
        runtime.emit({
          type: 'conflict',
          scope,
          key,
          method,
          route,
          waited: true,
          status,
          durationMs,
          elapsedMs: durationMs,
        });
      }
      return { action: 'reject', error: refusal };
    }
    if (isStoreLimitError(error)) {
      this.#settled = true;
      const refusal = runtime.limitError(error);
      if (this.#listening) {
        runtime.emit({
          type: 'store-limit',
          operation: 'reserve',
          error,
          scope,
          key,
          method,
          route,
          status: refusal.status,
        });
      }
      return { action: 'reject', error: refusal };
    }
    if (this.#listening) {
      runtime.emit({
        type: 'store-error',
        operation: 'reserve',
        error,
        durationMs,
        failedOpen: false,
        scope,
        key,
        method,
        route,
        owner,
      });
    }
    throw error;
  }

  get signal(): AbortSignal {
    // Created on first use: most handlers never look at it.
    this.#controller ??= new AbortController();
    return this.#controller.signal;
  }

  get maxBodyBytes(): number {
    return this.#runtime.maxBodyBytes;
  }

  /**
   * The response as it would be stored, or `undefined` when the finalization rule releases this status.
   * Never throws: a throwing rule is replaced by the default rule, and a throwing `redact` by a record of the
   * status alone (body omitted, no headers).
   */
  #prepare(response: CapturedResponse): StoredResponse | undefined {
    const runtime = this.#runtime;
    if (this.#decide(response.status) === 'release') return undefined;
    const stored = toStoredResponse(response, runtime);
    if (runtime.redact === undefined) return stored;
    let redacted: StoredResponse | undefined;
    try {
      redacted = runtime.redact(stored, this);
      if (!isStoredResponse(redacted)) throw new TypeError('redact did not return a response');
    } catch (error) {
      // A redact that throws, or returns no response (one that edits in place and forgets to return it): what
      // it was to remove cannot be told apart from the rest. Keep the status alone, which is what a retry needs
      // to know (the request ran), and nothing that could hold a secret; never read its failure as "release".
      this.#hookFailed('redact', error);
      return { status: stored.status, headers: {}, body: null, bodyOmitted: true };
    }
    return redacted;
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
    const { scope, key, method, route } = this;
    this.#runtime.emit({ type: 'hook-error', hook, error, scope, key, method, route });
  }

  /** `true` when an event would reach a listener: nothing is built or timed for events otherwise. */
  get #listening(): boolean {
    return hasListeners(this.#runtime.emit);
  }

  /** What every event of this execution carries. */
  #eventBase(durationMs: number) {
    const { scope, key, method, route, owner } = this;
    return {
      scope,
      key,
      method,
      route,
      owner,
      durationMs,
      executionMs: performance.now() - this.#reservedAtMs,
    };
  }

  async finalizeWith(
    response: CapturedResponse,
    target: ((params: FinalizeParams) => boolean | Promise<boolean>) | TransactionalStore,
  ): Promise<TransactionalOutcome> {
    if (this.#settled) return 'lease-lost';
    const finalize =
      typeof target === 'function' ? target : (params: FinalizeParams) => target.finalize(params);
    const stored = this.#prepare(response);
    if (stored === undefined) {
      if (this.#inTransaction && typeof target !== 'function') {
        // Reserved in this transaction and not to be stored: gone with it, so the retry executes.
        this.#settle();
        const startedMs = performance.now();
        await target.release({ scope: this.scope, key: this.key, owner: this.owner });
        if (this.#listening) {
          const base = this.#eventBase(performance.now() - startedMs);
          this.#runtime.emit({ type: 'released', ...base, reason: 'status', status: response.status });
        }
      }
      return 'not-stored';
    }
    const startedMs = performance.now();
    // Stop renewing now: the row is locked by the host's transaction until it commits, and a renewal from
    // another connection would wait for it, then find the record completed and report a lost lease.
    this.#settle();
    // Until `finish` sees the answer that went out, the commit is not known: if `finalize` throws, or the
    // transaction fails later, the host answers otherwise and `finish` releases the key. So the `finalized`
    // event waits for that answer too: an event reports what is durable.
    const { scope, key, owner } = this;
    const nowMs = this.#runtime.clock.nowMs();
    this.#storedExternally = { status: stored.status, durationMs: 0, omitted: undefined };
    // A limit is refused before it reaches the backend (the SPI's rule), so the transaction can go on with a
    // smaller record: the work is done, and its answer is kept down to the status alone.
    const candidates = [{ response: stored, omitted: undefined }, ...smallerResponses(stored)];
    let kept: (typeof candidates)[number] = { response: stored, omitted: undefined };
    let finalized = false;
    for (let i = 0; i < candidates.length; i++) {
      kept = candidates[i] as (typeof candidates)[number];
      try {
        finalized = await finalize({ scope, key, owner, response: kept.response, nowMs });
        break;
      } catch (error) {
        // A fault, or not even the status fits: the host's to handle (its transaction rolls back).
        if (!isStoreLimitError(error) || i === candidates.length - 1) {
          // Nothing was written: whatever the host answers now (its own status too, if it swallowed this),
          // `finish` releases the key and never reports the record durable.
          this.#storedExternally = { status: stored.status, durationMs: 0, omitted: undefined, failed: true };
          throw error;
        }
      }
    }
    const durationMs = performance.now() - startedMs;
    const { status } = stored;
    if (!finalized) {
      this.#storedExternally = undefined; // not ours any more: nothing to release
      if (this.#listening) {
        this.#runtime.emit({ type: 'lease-lost', ...this.#eventBase(durationMs), phase: 'finalize', status });
      }
      return 'lease-lost';
    }
    this.#storedExternally = { status, durationMs, omitted: kept.omitted };
    return 'finalized';
  }

  async finish(response: CapturedResponse): Promise<FinishOutcome> {
    if (this.#storedExternally !== undefined) return this.#afterExternal(response.status);
    if (this.#state === 'pending') {
      this.#settled = true;
      return 'not-reserved'; // the handler never reserved the key (it answered before its transaction)
    }
    if (!this.#settle()) return 'already-settled';
    const stored = this.#prepare(response);
    if (stored === undefined) return this.#release('status', response.status);
    try {
      return await this.#finalize(stored, undefined);
    } catch (error) {
      // A fault was already reported as a store-error event.
      if (!isStoreLimitError(error)) return 'store-error';
    }
    // The handler ran: its answer is the decision, and releasing the key would run it again on the retry. Keep
    // what the store can hold, down to the status alone.
    for (const { response: smaller, omitted } of smallerResponses(stored)) {
      try {
        return await this.#finalize(smaller, omitted);
      } catch (error) {
        if (!isStoreLimitError(error)) return 'store-error';
      }
    }
    // Not even the status fits (a store whose own bounds the record outgrew): free the key rather than leave it
    // blocked for its lease.
    return this.#release('unstorable', stored.status);
  }

  /** Store the response (owner-fenced); throws what the store threw, a limit included. */
  async #finalize(stored: StoredResponse, omitted: OmittedParts | undefined): Promise<FinishOutcome> {
    const { store, clock, emit } = this.#runtime;
    const finalizing = () =>
      store.finalize({
        scope: this.scope,
        key: this.key,
        owner: this.owner,
        response: stored,
        nowMs: clock.nowMs(),
      });
    let { value: finalized, durationMs } = await this.#runtime.callStore('finalize', this, finalizing);
    if (!finalized && this.#inTransaction) {
      // Reserved in the host's transaction, which rolled back (a handler error such as a deterministic 409),
      // and answered with a status that is stored: keep that answer for the retry, reserved afresh.
      ({ value: finalized, durationMs } = await this.#runtime.callStore('finalize', this, async () => {
        const nowMs = clock.nowMs();
        const again = await store.reserve({
          scope: this.scope,
          key: this.key,
          fingerprint: this.fingerprint,
          owner: this.owner,
          nowMs,
          leaseUntilMs: nowMs + this.#runtime.leaseMs,
          expiresAtMs: nowMs + this.#runtime.lifetimeMs,
        });
        return again.outcome === 'reserved' && (await finalizing());
      }));
      // Someone else holds the key by now (a duplicate that waited on the row): its answer stands.
      if (!finalized) return 'already-settled';
    }
    const { status } = stored;
    if (!finalized) {
      if (this.#listening) {
        emit({ type: 'lease-lost', ...this.#eventBase(durationMs), phase: 'finalize', status });
      }
      return 'lease-lost';
    }
    if (this.#listening) {
      emit({
        type: 'finalized',
        ...this.#eventBase(durationMs),
        status,
        external: false,
        ...(omitted === undefined ? {} : { omitted }),
      });
    }
    return 'finalized';
  }

  /**
   * The host finalized in its transaction; now its answer goes out. The same status means the transaction
   * committed what it stored. Another status (or an abort) means it failed after the finalize was written
   * (the commit itself, or a later statement), so the record is most likely still in flight and ours: release
   * it. The release is owner-fenced and never deletes a completed record, so it changes nothing if the commit
   * did succeed.
   */
  async #afterExternal(status: number | undefined): Promise<FinishOutcome> {
    const stored = this.#storedExternally;
    this.#storedExternally = undefined;
    if (stored === undefined) return 'already-settled';
    if (status === stored.status && stored.failed !== true) return this.#finalizedExternally(stored);
    try {
      const { value: released, durationMs } = await this.#runtime.callStore('release', this, () =>
        this.#runtime.store.release({ scope: this.scope, key: this.key, owner: this.owner }),
      );
      if (!released) return this.#finalizedExternally(stored); // the commit went through after all
      if (this.#listening) {
        this.#runtime.emit({
          type: 'released',
          ...this.#eventBase(durationMs),
          reason: 'aborted',
          ...(status === undefined ? {} : { status }),
        });
      }
      return 'released';
    } catch {
      return 'store-error';
    }
  }

  /** The host's transaction committed the record it finalized: now that is durable, say so. */
  #finalizedExternally(stored: ExternalFinalize): 'finalized' {
    if (this.#listening) {
      const { status, durationMs, omitted } = stored;
      this.#runtime.emit({
        type: 'finalized',
        ...this.#eventBase(durationMs),
        status,
        external: true,
        ...(omitted === undefined ? {} : { omitted }),
      });
    }
    return 'finalized';
  }

  async abort(): Promise<void> {
    if (this.#storedExternally !== undefined) await this.#afterExternal(undefined);
    else if (this.#state === 'pending') this.#settled = true;
    else if (this.#settle()) await this.#release('aborted');
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
      // Reserved in the host's transaction, which rolled back: the reservation went with it.
      const gone = released || this.#inTransaction;
      if (!this.#listening) return gone ? 'released' : 'lease-lost';
      const withStatus = status === undefined ? {} : { status };
      if (!gone) {
        emit({ type: 'lease-lost', ...this.#eventBase(durationMs), phase: 'release', ...withStatus });
        return 'lease-lost';
      }
      emit({ type: 'released', ...this.#eventBase(durationMs), reason, ...withStatus });
      return 'released';
    } catch {
      return 'store-error';
    }
  }

  #renewing = false;

  /** Renew the lease (called by the heartbeat). A lost reservation aborts `signal`. */
  beat(): void {
    if (this.#renewing || this.#settled) return;
    const { maxExecutionMs } = this.#runtime;
    if (maxExecutionMs !== undefined && performance.now() - this.#reservedAtMs >= maxExecutionMs) {
      // A handler that has not answered in this long may never: stop holding its key, which frees it a lease
      // later. (Its late answer is still stored if nobody took the key over by then.)
      this.#runtime.heartbeat?.remove(this);
      return;
    }
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
          if (this.#listening)
            emit({ type: 'lease-lost', ...this.#eventBase(durationMs), phase: 'heartbeat' });
          this.#controller ??= new AbortController();
          this.#controller.abort(new Error('the idempotency reservation was lost'));
        },
        () => {
          this.#renewing = false; // reported as a store-error event; the next beat tries again
        },
      );
  }
}
