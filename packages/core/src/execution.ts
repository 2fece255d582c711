import { type Decision, decide, isCompleted, type ReserveFound, reserveParams } from './decision.js';
import { type IdemError, isStoreLimitError } from './errors.js';
import { hasListeners, type IdempotencyEventListener } from './events.js';
import {
  defaultFinalizationRule,
  type FinalizationAction,
  type FinalizationRule,
} from './finalization-rules.js';
import type { HeartbeatScheduler, Renewable } from './heartbeat.js';
import {
  type ExecutionState,
  LEASED,
  type LeasedState,
  step,
  TRANSACTIONAL,
  type TransactionalState,
  type TransitionTable,
} from './lifecycle.js';
import {
  type CapturedResponse,
  type OmittedParts,
  type ReplayResponse,
  smallerResponses,
  toStoredResponse,
} from './response.js';
import { type CallRef, isThenable, type StoreCall } from './store-call.js';
import type {
  Clock,
  FinalizeParams,
  IdempotencyStore,
  MaybePromise,
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
 * flight until its lease lapses), `already-settled` (finished or aborted before), `not-reserved` (a
 * transactional execution whose host answered before it reserved the key).
 */
export type FinishOutcome =
  | 'finalized'
  | 'released'
  | 'lease-lost'
  | 'store-error'
  | 'already-settled'
  | 'not-reserved';

/**
 * What {@link TransactionalExecution.reserveWith} found inside the host's transaction: `execute` (the key is reserved in
 * it: do the work, then `finalizeWith` in the same transaction), or the answer to send instead of running the
 * handler: the stored response (`replay`), or an error (`reject`: the key was used for another request, or
 * is held by a request of another node still in flight).
 */
export type TransactionalReservation =
  | { readonly action: 'execute' }
  | { readonly action: 'replay'; readonly response: ReplayResponse }
  | { readonly action: 'reject'; readonly error: IdemError };

/**
 * What `finalizeWith` did inside the host's transaction: `finalized` (the record is written
 * in it; commit), `lease-lost` (another request owns the key now; roll back, or the work is done twice), or
 * `not-stored` (the finalization rule releases this status: nothing was written; the key is released when
 * the response goes out).
 */
export type TransactionalOutcome = 'finalized' | 'lease-lost' | 'not-stored';

/** What both lifecycles' executions have: the request, and the calls that end it. */
interface ExecutionBase<Host> extends RecordContext<Host> {
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
   * The lower-case names of the response headers stored for replay (the `replayHeaders` allow-list): a
   * capture that can look headers up by name need hand `finish` only these (and `contentEncoding`).
   */
  readonly storedHeaders: ReadonlySet<string>;
  /**
   * Finalize inside the host's own transaction, so that its work and the record commit together: applies the
   * finalization rule and writes the record through `store` (the store's view of that transaction, e.g.
   * `sqlStore.inTransaction(tx)`) with this owner and the coordinator's clock. A key that `reserveWith`
   * reserved in the transaction is released there when the rule does not store this status. An exception
   * from the store is the host's to handle (its transaction rolls back). On `lease-lost` the host MUST roll
   * back.
   *
   * Whether the transaction committed is known from the answer that goes out: `finish` with the status that
   * was written makes the record durable (and reports it), any other answer releases the key.
   *
   * @example
   * await db.transaction(async (tx) => {
   *   const response = await work(tx);
   *   if ((await execution.finalizeWith(response, store.inTransaction(tx))) === 'lease-lost')
   *     throw new Error('lost the reservation: roll back');
   *   return response;
   * });
   */
  finalizeWith(response: CapturedResponse, store: TransactionalStore): Promise<TransactionalOutcome>;
  /** The answer went out (or is about to): store it or release the key, per the finalization rule. Never throws. */
  finish(response: CapturedResponse): Promise<FinishOutcome>;
  /** Release the key: the handler threw, or the client left. Never throws. */
  abort(): Promise<void>;
}

/**
 * A request `begin` reserved under a lease (`reserveIn: 'begin'`): run the handler, then `finish` (or
 * `abort`). Its states and transitions: {@link LEASED}. Call its methods on the object, do not detach them.
 */
export interface LeasedExecution<Host = unknown> extends ExecutionBase<Host> {
  readonly lifecycle: 'leased';
  readonly state: LeasedState;
  /**
   * The work may or may not have taken effect (its commit did not answer): neither store an answer nor release
   * the key, and stop renewing the lease. The key stays in flight until its lease lapses, so a retry waits (or
   * is refused as in flight) instead of running the work again at once, and then takes the key over. Reports a
   * `held` event with `reason`; every later `finish` or `abort` is a no-op. Never throws.
   */
  hold(reason: string): void;
}

/**
 * A request whose key the host reserves in its own transaction (`reserveIn: 'transaction'`): `reserveWith`
 * there, do the work, `finalizeWith` in the same transaction, and `finish` with the answer that goes out. Its
 * states and transitions: {@link TRANSACTIONAL}.
 */
export interface TransactionalExecution<Host = unknown> extends ExecutionBase<Host> {
  readonly lifecycle: 'transactional';
  readonly state: TransactionalState;
  /**
   * Reserve the key inside the host's transaction, before its work. On `execute` the host does its work and
   * `finalizeWith` the same store; otherwise it sends the answer it gets (a replay, or an error) and writes
   * nothing. A fault of the store is thrown (the transaction fails with it); a value the store cannot hold,
   * or a duplicate still in flight when the store's lock wait ran out, comes back as a `reject`.
   */
  reserveWith(store: TransactionalStore): Promise<TransactionalReservation>;
}

/** A request running under its key, in either lifecycle (`lifecycle` tells which). */
export type Execution<Host = unknown> = LeasedExecution<Host> | TransactionalExecution<Host>;

/** What an execution needs from its coordinator. */
export interface ExecutionRuntime {
  readonly store: IdempotencyStore;
  readonly clock: Clock;
  readonly leaseMs: number;
  /** How long a new record is kept: lifetime plus grace (ms). */
  readonly keepMs: number;
  /** Renews the leases of running executions; undefined when the heartbeat is off. */
  readonly heartbeat: HeartbeatScheduler | undefined;
  readonly rule: FinalizationRule;
  readonly allowHeaders: ReadonlySet<string>;
  /** The coordinator's body cap within the store's declared limits. */
  readonly maxBodyBytes: number;
  /** No lease is renewed this long after its reservation (ms); undefined: as long as the handler runs. */
  readonly maxExecutionMs: number | undefined;
  // biome-ignore lint/suspicious/noExplicitAny: the host type is the coordinator's; executions pass themselves.
  readonly redact: ((response: StoredResponse, context: RecordContext<any>) => StoredResponse) | undefined;
  readonly emit: IdempotencyEventListener;
  readonly callStore: StoreCall;
  /** The store's `finalize`, as a function made once (a store call's `run`). */
  readonly finalizeIn: (params: FinalizeParams) => MaybePromise<boolean>;
  /** Report a decision of `reserveWith` as its event. */
  report(decision: Decision, attempt: Attempt<unknown>, durationMs: number): void;
  /**
   * The coordinator's answer to a decision of `reserveWith` other than `execute`: a replay, or a refusal. A
   * fault is thrown.
   */
  answerInTransaction(
    decision: Exclude<Decision, { answer: 'execute' }>,
    attempt: Attempt<unknown>,
    durationMs: number,
  ): Promise<TransactionalReservation>;
}

/**
 * One request on its way to a decision: its record (scope, key), what the decision, its event and the hooks
 * need to know of it.
 */
export interface Attempt<Host> extends CallRef {
  readonly fingerprint: string;
  readonly owner: string;
  /** When the request began, on the monotonic clock (ms; 0 when nothing listens for events). */
  readonly startedMs: number;
  /** For the hooks' context. */
  readonly request: ExecutionRequest<Host>;
}

/** The request an execution runs for: its identity, and the adapter's request object. */
export interface ExecutionRequest<Host> {
  readonly method: string;
  readonly route: string;
  readonly path: string | undefined;
  readonly host: Host;
}

/** A record the host wrote in its own transaction, not known to be committed yet. */
interface Written {
  readonly status: number;
  /** How long the store's finalize took, in ms. */
  readonly durationMs: number;
  /** What the store could not hold and was left out. */
  readonly omitted: OmittedParts | undefined;
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

type Lifecycle = 'leased' | 'transactional';

const IN_FLIGHT = { answer: 'in-progress', found: 'record' } as const satisfies Decision;

const TABLES: Record<Lifecycle, TransitionTable> = { leased: LEASED, transactional: TRANSACTIONAL };

/**
 * An execution of either lifecycle: its state is one field, changed only by {@link step} over its lifecycle's
 * table. A class rather than a closure-built object: one request allocates one object with its methods on
 * the prototype, which matters on the hot path of every covered request.
 */
export class KeyedExecution<Host = unknown> implements Renewable {
  readonly scope: string;
  readonly key: string;
  readonly method: string;
  readonly route: string;
  readonly path: string | undefined;
  readonly host: Host;
  readonly fingerprint: string;
  readonly owner: string;
  readonly lifecycle: Lifecycle;
  readonly #runtime: ExecutionRuntime;
  #state: ExecutionState;
  #tookOver: boolean;
  #controller: AbortController | undefined;
  /** What the host wrote in its transaction (status, the store's time, what was left out), in `written`. */
  #written: Written | undefined;
  /** The transactional finalize of `finalizeWith`, while it runs. */
  #writing: Promise<TransactionalOutcome> | undefined;
  /** A renewal is in flight: the heartbeat does not start another. */
  #renewing = false;
  /** When the lease was last set, on the monotonic clock (ms); read by the heartbeat. */
  renewedAtMs = performance.now();
  /** The heartbeat's slot for this execution (its bookkeeping). */
  heartbeatSlot = -1;
  readonly #reservedAtMs = this.renewedAtMs;

  constructor(runtime: ExecutionRuntime, attempt: Attempt<Host>, lifecycle: Lifecycle, tookOver: boolean) {
    this.#runtime = runtime;
    const { request } = attempt;
    this.scope = attempt.scope;
    this.key = attempt.key;
    this.method = request.method;
    this.route = request.route;
    this.path = request.path;
    this.host = request.host;
    this.fingerprint = attempt.fingerprint;
    this.owner = attempt.owner;
    this.lifecycle = lifecycle;
    this.#tookOver = tookOver;
    this.#state = lifecycle === 'leased' ? 'reserved' : 'pending';
    // A key the host reserves in its transaction is held by that transaction, not by a lease.
    if (lifecycle === 'leased') runtime.heartbeat?.add(this);
  }

  get state(): ExecutionState {
    return this.#state;
  }

  get tookOver(): boolean {
    return this.#tookOver;
  }

  get signal(): AbortSignal {
    // Created on first use: most handlers never look at it.
    this.#controller ??= new AbortController();
    return this.#controller.signal;
  }

  get maxBodyBytes(): number {
    return this.#runtime.maxBodyBytes;
  }

  get storedHeaders(): ReadonlySet<string> {
    return this.#runtime.allowHeaders;
  }

  /** Take the named transition of this execution's lifecycle. */
  #take(name: string): void {
    this.#state = step(TABLES[this.lifecycle], this.#state, name);
  }

  /** Stop renewing the lease (the heartbeat's or nobody's). */
  #stopRenewing(): void {
    if (this.lifecycle === 'leased') this.#runtime.heartbeat?.remove(this);
  }

  async reserveWith(store: TransactionalStore): Promise<TransactionalReservation> {
    if (this.#state === 'settled') return this.#answeredMeanwhile();
    if (this.#state !== 'pending') {
      throw new Error(
        'reserveWith: the key is reserved already (reserveIn is not "transaction", or it was called twice)',
      );
    }
    const runtime = this.#runtime;
    const startedMs = performance.now();
    let found: ReserveFound;
    try {
      const params = reserveParams(this, runtime.clock.nowMs(), runtime.leaseMs, runtime.keepMs);
      const value = await store.reserve(params);
      // A completed record found here was committed by another transaction: the next retry needs none.
      if (value.outcome === 'exists') runtime.store.replayCache?.keep(value.record, params.nowMs);
      found = { ok: true, value };
    } catch (error) {
      found = { ok: false, error };
    }
    const decision = decide(found, this.fingerprint);
    if (this.#state !== 'pending') {
      // Answered while the store was reserving (a handler timeout, a server that broke the response off), or a
      // second reserveWith won: this one does no work. A reservation it made goes with its transaction's
      // rollback, and is released in it now in case the host commits anyway.
      if (decision.answer === 'execute') {
        await Promise.resolve()
          .then(() => store.release({ scope: this.scope, key: this.key, owner: this.owner }))
          .catch(() => {});
      }
      return this.#answeredMeanwhile();
    }
    const attempt = this.#attempt(startedMs);
    const durationMs = performance.now() - startedMs;
    runtime.report(decision, attempt, durationMs);
    if (decision.answer === 'execute') {
      this.#take('reserve');
      this.#tookOver = decision.tookOver;
      return { action: 'execute' };
    }
    // A fault leaves it pending (and is thrown); anything else is someone else's answer: nothing of ours to finish.
    if (decision.answer !== 'unavailable') this.#take('answer-instead');
    return runtime.answerInTransaction(decision, attempt, durationMs);
  }

  /** What `reserveWith` answers once its execution is answered or reserved otherwise: do nothing, retry later. */
  #answeredMeanwhile(): Promise<TransactionalReservation> {
    return this.#runtime.answerInTransaction(IN_FLIGHT, this.#attempt(0), 0);
  }

  /** This execution as an attempt of `reserveWith`, for its decision, event and hooks. */
  #attempt(startedMs: number): Attempt<Host> {
    const { scope, key, method, route, fingerprint, owner } = this;
    return { scope, key, method, route, fingerprint, owner, startedMs, request: this };
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

  async finalizeWith(response: CapturedResponse, store: TransactionalStore): Promise<TransactionalOutcome> {
    const state = this.#state;
    if (state === 'pending') {
      throw new Error('finalizeWith: reserve the key with reserveWith first, in the same transaction');
    }
    if (state !== 'reserved' && state !== 'lost') return 'lease-lost'; // settled, or written already
    const { scope, key, owner } = this;
    const stored = this.#prepare(response);
    if (stored === undefined) {
      if (this.lifecycle === 'leased') return 'not-stored'; // the answer that goes out releases the key
      // Reserved in this transaction and not to be stored: gone with it, so the retry executes.
      this.#take('release-in-transaction');
      const startedMs = performance.now();
      await store.release({ scope, key, owner });
      if (this.#listening) {
        const base = this.#eventBase(performance.now() - startedMs);
        this.#runtime.emit({ type: 'released', ...base, reason: 'status', status: response.status });
      }
      return 'not-stored';
    }
    // Written before the store is called: an answer (or an abort) that comes while it runs waits for the write,
    // then is read against what it wrote. Stop renewing now: the row is locked by the host's transaction until
    // it commits, and a renewal from another connection would wait for it, then find the record completed and
    // report a lost lease. Until `finish` sees the answer that goes out the commit is not known, so the
    // `finalized` event waits for that answer: an event reports what is durable.
    this.#take('write');
    this.#stopRenewing();
    const writing = this.#write(store, stored);
    this.#writing = writing;
    try {
      return await writing;
    } finally {
      this.#writing = undefined;
    }
  }

  /**
   * Write the record through the host's transaction, as much of it as the store can hold, and take the
   * transition of what that did. A limit is refused before it reaches the backend (the SPI's rule), so the
   * transaction can go on with a smaller record: the work is done, and its answer is kept down to the status
   * alone.
   */
  async #write(store: TransactionalStore, stored: StoredResponse): Promise<TransactionalOutcome> {
    const { scope, key, owner } = this;
    const startedMs = performance.now();
    const nowMs = this.#runtime.clock.nowMs();
    this.#written = { status: stored.status, durationMs: 0, omitted: undefined };
    const candidates = [{ response: stored, omitted: undefined }, ...smallerResponses(stored)];
    let kept: (typeof candidates)[number] = { response: stored, omitted: undefined };
    let finalized = false;
    for (let i = 0; i < candidates.length; i++) {
      kept = candidates[i] as (typeof candidates)[number];
      try {
        finalized = await store.finalize({ scope, key, owner, response: kept.response, nowMs });
        break;
      } catch (error) {
        // A fault, or not even the status fits: the host's to handle (its transaction rolls back).
        if (!isStoreLimitError(error) || i === candidates.length - 1) {
          // Nothing was written: whatever the host answers now (its own status too, if it swallowed this),
          // `finish` releases the key and never reports the record durable.
          this.#take('write-threw');
          throw error;
        }
      }
    }
    const durationMs = performance.now() - startedMs;
    if (!finalized) {
      this.#take('lost-at-write'); // not ours any more: nothing to release
      if (this.#listening) {
        const { status } = stored;
        this.#runtime.emit({ type: 'lease-lost', ...this.#eventBase(durationMs), phase: 'finalize', status });
      }
      return 'lease-lost';
    }
    this.#written = { status: stored.status, durationMs, omitted: kept.omitted };
    return 'finalized';
  }

  async finish(response: CapturedResponse): Promise<FinishOutcome> {
    switch (this.#state) {
      case 'written':
      case 'write-failed':
        return this.#afterWrite(response.status);
      case 'pending':
        this.#take('never-reserved'); // the handler answered before its transaction reserved the key
        return 'not-reserved';
      case 'settled':
        return 'already-settled';
    }
    const stored = this.#prepare(response);
    if (stored === undefined) {
      this.#take('release');
      this.#stopRenewing();
      return this.#release('status', response.status);
    }
    // Reserved in the host's transaction but never written there: it rolled back (a deterministic refusal
    // such as a 409 that is stored), or committed without the answer. Either way the answer is kept for the
    // retry, reserved afresh if the rollback took the reservation.
    const afresh = this.lifecycle === 'transactional';
    this.#take(afresh ? 'store-after-rollback' : 'finalize');
    this.#stopRenewing();
    try {
      const finalizing = this.#finalize(stored, undefined, afresh);
      return isThenable(finalizing) ? await finalizing : finalizing;
    } catch (error) {
      // A fault was already reported as a store-error event.
      if (!isStoreLimitError(error)) return 'store-error';
    }
    // The handler ran: its answer is the decision, and releasing the key would run it again on the retry. Keep
    // what the store can hold, down to the status alone.
    for (const { response: smaller, omitted } of smallerResponses(stored)) {
      try {
        return await this.#finalize(smaller, omitted, afresh);
      } catch (error) {
        if (!isStoreLimitError(error)) return 'store-error';
      }
    }
    // Not even the status fits (a store whose own bounds the record outgrew): free the key rather than leave it
    // blocked for its lease.
    return this.#release('unstorable', stored.status);
  }

  /**
   * Store the response (owner-fenced); `afresh`: reserve the key again first if the record is not ours (the
   * host's transaction rolled its reservation back). Throws (or rejects with) what the store threw, a limit
   * included. Synchronous when the store answered synchronously.
   */
  #finalize(
    stored: StoredResponse,
    omitted: OmittedParts | undefined,
    afresh: boolean,
  ): FinishOutcome | Promise<FinishOutcome> {
    const runtime = this.#runtime;
    const { scope, key, owner } = this;
    const params: FinalizeParams = { scope, key, owner, response: stored, nowMs: runtime.clock.nowMs() };
    const done = runtime.callStore('finalize', this, runtime.finalizeIn, undefined, params);
    if (isThenable(done)) {
      return Promise.resolve(done).then(({ value, durationMs }) =>
        value || !afresh
          ? this.#finalized(value, durationMs, stored, omitted)
          : this.#finalizeAfresh(stored, omitted),
      );
    }
    return done.value || !afresh
      ? this.#finalized(done.value, done.durationMs, stored, omitted)
      : this.#finalizeAfresh(stored, omitted);
  }

  /** The record was not ours (the host's transaction rolled its reservation back): reserve it again, then store. */
  async #finalizeAfresh(stored: StoredResponse, omitted: OmittedParts | undefined): Promise<FinishOutcome> {
    const runtime = this.#runtime;
    const { store, clock } = runtime;
    const { scope, key, owner } = this;
    const { value: finalized, durationMs } = await runtime.callStore('finalize', this, async () => {
      const again = await store.reserve(reserveParams(this, clock.nowMs(), runtime.leaseMs, runtime.keepMs));
      return (
        again.outcome === 'reserved' &&
        (await store.finalize({ scope, key, owner, response: stored, nowMs: clock.nowMs() }))
      );
    });
    // Someone else holds the key by now (a duplicate that waited on the row): its answer stands, and this
    // execution's reservation ends as a lost one (its event closes what `reserved` opened).
    return this.#finalized(finalized, durationMs, stored, omitted);
  }

  /** What a finalize answered: stored, or the lease was lost. */
  #finalized(
    finalized: boolean,
    durationMs: number,
    stored: StoredResponse,
    omitted: OmittedParts | undefined,
  ): FinishOutcome {
    const { emit } = this.#runtime;
    const { status } = stored;
    if (!finalized) {
      if (this.#listening) {
        emit({ type: 'lease-lost', ...this.#eventBase(durationMs), phase: 'finalize', status });
      }
      return 'lease-lost';
    }
    if (this.#listening) {
      this.#emitFinalized(durationMs, status, false, omitted);
    }
    return 'finalized';
  }

  /**
   * The host wrote the record in its transaction; now its answer goes out (`status`), or it aborted. The same
   * status means the transaction committed what it wrote. Another status (or an abort, or a write that threw)
   * means it failed after the write (the commit itself, or a later statement), so the record is most likely
   * still in flight and ours: release it. The release is owner-fenced and never deletes a completed record,
   * so it changes nothing if the commit did succeed.
   */
  async #afterWrite(status: number | undefined): Promise<FinishOutcome> {
    // The write may still be running: what it did decides.
    if (this.#writing !== undefined) await this.#writing.catch(() => {});
    if (this.#state === 'settled') return 'already-settled'; // lost at the write, or answered by a call before
    const written = this.#written as Written;
    const committed = this.#state === 'written' && status === written.status;
    this.#take(committed ? 'commit' : status === undefined ? 'abort-after-write' : 'roll-back');
    this.#written = undefined;
    if (committed) return this.#durable(written);
    try {
      const { value: released, durationMs } = await this.#runtime.callStore('release', this, () =>
        this.#runtime.store.release({ scope: this.scope, key: this.key, owner: this.owner }),
      );
      if (!released) {
        // Not ours in flight: the commit went through after all (completed), or the rollback took a
        // reservation made in the same transaction with it (gone), or another request holds the key now.
        const { value: record } = await this.#runtime.callStore('load', this, () =>
          this.#runtime.store.load({ scope: this.scope, key: this.key }),
        );
        if (record !== undefined && isCompleted(record) && record.fingerprint === this.fingerprint) {
          return this.#durable(written);
        }
        if (record !== undefined) {
          if (this.#listening) {
            const withStatus = status === undefined ? {} : { status };
            this.#runtime.emit({
              type: 'lease-lost',
              ...this.#eventBase(0),
              phase: 'release',
              ...withStatus,
            });
          }
          return 'lease-lost';
        }
      }
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

  /** The host's transaction committed the record it wrote: now that is durable, say so. */
  #durable(written: Written): 'finalized' {
    if (this.#listening) {
      const { status, durationMs, omitted } = written;
      this.#emitFinalized(durationMs, status, true, omitted);
    }
    return 'finalized';
  }

  /**
   * The `finalized` event, every field written out: the one event of every execution that stores its answer.
   * (Fields set after a spread, as `{ ...this.#eventBase(…), status }`, cost Node 20 about 0.4 µs an event.)
   */
  #emitFinalized(
    durationMs: number,
    status: number,
    external: boolean,
    omitted: OmittedParts | undefined,
  ): void {
    const { scope, key, method, route, owner } = this;
    const executionMs = performance.now() - this.#reservedAtMs;
    const type = 'finalized';
    this.#runtime.emit(
      omitted === undefined
        ? { type, scope, key, method, route, owner, durationMs, executionMs, status, external }
        : { type, scope, key, method, route, owner, durationMs, executionMs, status, external, omitted },
    );
  }

  async abort(): Promise<void> {
    switch (this.#state) {
      case 'written':
      case 'write-failed':
        await this.#afterWrite(undefined);
        return;
      case 'pending':
        this.#take('abort-pending');
        return;
      case 'settled':
        return;
    }
    this.#take('abort');
    this.#stopRenewing();
    await this.#release('aborted');
  }

  hold(reason: string): void {
    if (this.lifecycle !== 'leased') throw new Error('hold: only a leased execution holds its key');
    if (this.#state === 'settled') return;
    this.#take('hold');
    this.#stopRenewing();
    if (this.#listening) this.#runtime.emit({ type: 'held', ...this.#eventBase(0), reason });
  }

  async #release(reason: 'status' | 'aborted' | 'unstorable', status?: number): Promise<FinishOutcome> {
    const { store, emit } = this.#runtime;
    try {
      const { value: released, durationMs } = await this.#runtime.callStore('release', this, () =>
        store.release({ scope: this.scope, key: this.key, owner: this.owner }),
      );
      // Reserved in the host's transaction, which rolled back: the reservation went with it.
      const gone = released || this.lifecycle === 'transactional';
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

  /** Renew the lease (called by the heartbeat). A lost reservation aborts `signal`. */
  beat(): void {
    if (this.#renewing || this.#state !== 'reserved') return;
    const { maxExecutionMs } = this.#runtime;
    if (maxExecutionMs !== undefined && performance.now() - this.#reservedAtMs >= maxExecutionMs) {
      // A handler that has not answered in this long may never: stop holding its key, which frees it a lease
      // later. (Its late answer is still stored if nobody took the key over by then.)
      this.#stopRenewing();
      return;
    }
    this.#renewing = true;
    this.renewedAtMs = performance.now();
    const { store, clock, leaseMs, emit } = this.#runtime;
    Promise.resolve(
      this.#runtime.callStore('renewLease', this, () =>
        store.renewLease({
          scope: this.scope,
          key: this.key,
          owner: this.owner,
          leaseUntilMs: clock.nowMs() + leaseMs,
        }),
      ),
    ).then(
      ({ value: renewed, durationMs }) => {
        this.#renewing = false;
        if (renewed || this.#state !== 'reserved') return;
        this.#take('lose-lease');
        this.#stopRenewing();
        if (this.#listening) emit({ type: 'lease-lost', ...this.#eventBase(durationMs), phase: 'heartbeat' });
        this.#controller ??= new AbortController();
        this.#controller.abort(new Error('the idempotency reservation was lost'));
      },
      () => {
        this.#renewing = false; // reported as a store-error event; the next beat tries again
      },
    );
  }
}
