import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { type Decision, decide, isCompleted, reserveParams, storeLimitError } from './decision.js';
import {
  IdemBodyUnseenError,
  type IdemError,
  IdemInProgressError,
  IdemKeyInvalidError,
  IdemKeyMissingError,
  IdemKeyReusedError,
  IdemStoreUnavailableError,
} from './errors.js';
import { hasListeners, type IdempotencyEventListeners, safeListener } from './events.js';
import {
  type Attempt,
  type ExecutionRuntime,
  KeyedExecution,
  type LeasedExecution,
  type RecordContext,
  type TransactionalExecution,
  type TransactionalReservation,
} from './execution.js';
import { defaultFinalizationRule, type FinalizationRule } from './finalization-rules.js';
import {
  computeFingerprint,
  type FingerprintInput,
  type FingerprintOptions,
  formDataValue,
  UNSEEN_BODY,
} from './fingerprint.js';
import { HeartbeatScheduler } from './heartbeat.js';
import { checkScope } from './inspection.js';
import { type KeyFormat, parseIdempotencyKey } from './key-format.js';
import { decideReservation } from './reservation.js';
import {
  DEFAULT_MAX_BODY_BYTES,
  DEFAULT_REPLAY_HEADERS,
  NEVER_STORED_HEADERS,
  type ReplayResponse,
  toReplayResponse,
} from './response.js';
import { Deadlines, isThenable, StoreTimeoutError, storeCalls, type Timed } from './store-call.js';
import {
  type Clock,
  type IdempotencyRecord,
  type IdempotencyStore,
  type MaybePromise,
  type ReserveParams,
  type ReserveResult,
  type StoredResponse,
  systemClock,
} from './types.js';

/** What to do when a request's key is held by a request still in flight. */
export type InFlightStrategy =
  | { readonly strategy: 'reject' }
  | {
      readonly strategy: 'wait';
      /** The longest a request waits for the other one, in ms. @default 10_000 */
      readonly maxWaitMs?: number;
      /** The first poll delay, in ms; it doubles up to `maxPollMs`. @default 25 */
      readonly initialPollMs?: number;
      /** @default 500 */
      readonly maxPollMs?: number;
      /**
       * The status when the wait runs out: 409 (the IETF draft) or 503, which Iceberg's Java client retries
       * with the same key where it reads 409 as AlreadyExists / CommitFailed. @default 409
       */
      readonly timeoutStatus?: 409 | 503;
    };

/** The statuses of the coordinator's own answers. */
export interface AnswerStatuses {
  /** No key on a covered request while `required`. @default 400 */
  readonly missingKey: number;
  /** A malformed or repeated key. @default 400 */
  readonly invalidKey: number;
  /** The key was used for another request. @default 422 (an API that declares no 422, like Iceberg, uses 400) */
  readonly keyReused: number;
  /** The key is held by a request in flight (`reject` strategy). @default 409 */
  readonly inProgress: number;
  /** The store failed or timed out. @default 503 */
  readonly storeUnavailable: number;
  /** The store cannot hold this request's scope or key (`IDEMPOTENCY_STORE_LIMIT`). @default 400 */
  readonly storeLimit: number;
  /** A keyed request with a body no parser read (`IDEMPOTENCY_BODY_UNSEEN`). @default 415 */
  readonly bodyUnseen: number;
}

/**
 * Options of {@link createIdempotency}. `Host` is the type of the framework request an adapter passes along
 * (`host` on each request), which the hooks receive in their context.
 */
export interface IdempotencyOptions<Host = unknown> {
  /** Where records live. */
  readonly store: IdempotencyStore;
  /** `false` turns the coordinator into a pass-through: the header is ignored. @default true */
  readonly enabled?: boolean;
  /** Answer covered requests without a key with 400. @default false */
  readonly required?: boolean;
  /** Methods the coordinator covers; others pass through. @default ['POST', 'PUT', 'PATCH', 'DELETE'] */
  readonly methods?: readonly string[];
  /** The request header that carries the key. @default 'idempotency-key' */
  readonly headerName?: string;
  /** @default 'uuidv7' */
  readonly keyFormat?: KeyFormat;
  /** With `uuidv7`: reject keys whose embedded time is this far ahead of the clock, in ms. Off by default. */
  readonly maxFutureSkewMs?: number;
  /** How long a key is remembered from first use, in ms. @default 86_400_000 (24 h) */
  readonly lifetimeMs?: number;
  /** Added to the lifetime before a record may be purged, to absorb clock skew between nodes, in ms. @default 60_000 */
  readonly graceMs?: number;
  /** How long a reservation is honoured without renewal; after it a retry may take over, in ms. @default 30_000 */
  readonly leaseMs?: number;
  /** Renew the lease this often while the handler runs, in ms; `false` turns it off. @default leaseMs / 3 */
  readonly heartbeatIntervalMs?: number | false;
  /**
   * Stop renewing a lease this long after its reservation, in ms: a handler that has not answered by then
   * (hung, or abandoned by a client that left) frees its key one lease later. @default no limit: the lease is
   * renewed for as long as the handler runs
   */
  readonly maxExecutionMs?: number;
  /** @default { strategy: 'reject' } */
  readonly inFlight?: InFlightStrategy;
  /**
   * Where the key is reserved. `'begin'`: `begin` reserves it in the store, before the handler runs, under a
   * lease. `'transaction'`: `begin` only checks the key and takes the fingerprint; the handler reserves the
   * key inside its own database transaction (`execution.reserveWith(store.inTransaction(tx))`) and finalizes
   * it there: one transaction per request, duplicates wait on the database's row lock, and a crash rolls the
   * reservation back with everything else. For hosts whose data lives in the store's database.
   * @default 'begin'
   */
  readonly reserveIn?: 'begin' | 'transaction';
  /**
   * With `reserveIn: 'transaction'`: read the key's record (`store.load`) before handing the request to the
   * handler, and answer a completed one there (its replay, or the refusal of a key used for another request)
   * without running the handler or opening a transaction. A retry then costs one read instead of a
   * transaction; a fresh key costs that read more. Anything else the read finds (nothing, a record in flight or
   * expired, a store fault, unreported) is left to the transaction to decide, as without it. A store with a
   * replay cache answers the read from there, and keeps the completed records it reads. @default false
   */
  readonly readBeforeTransaction?: boolean;
  /**
   * When the host must have answered this request, on `performance.now()`'s clock (its own request deadline),
   * or `undefined` for none. The store calls before the handler end by then: a reserve (and each poll of the
   * `wait` strategy) not answered by then is the store's timeout (503, a late reservation freed), and past it
   * the store is not called; the read before the transaction (`readBeforeTransaction`) is given up then, or
   * skipped, and the transaction after it, which the host bounds by the same time, answers within it.
   * @default none: each call is bounded by `storeTimeoutMs` alone
   */
  readonly deadline?: (request: IdempotentRequest<Host>) => number | undefined;
  readonly statuses?: Partial<AnswerStatuses>;
  /** The `Retry-After` value (s) of 409 and 503 answers. @default 1 */
  readonly retryAfterSeconds?: number;
  /** `'open'` executes without a record when the store fails; `'closed'` answers 503. @default 'closed' */
  readonly failMode?: 'closed' | 'open';
  /** A store call that takes longer fails as unavailable, in ms. @default 2_000 */
  readonly storeTimeoutMs?: number;
  /** Response headers stored and replayed (never `set-cookie`, `date` or auth headers). */
  readonly replayHeaders?: readonly string[];
  /**
   * Larger bodies are not stored; the replay says `idempotent-replay-body-omitted: true`. A store that declares
   * a lower `limits.maxBodyBytes` lowers it. @default 1 MiB
   */
  readonly maxBodyBytes?: number;
  /** Fingerprint options, or a function that computes the fingerprint itself. */
  readonly fingerprint?: FingerprintOptions | ((request: IdempotentRequest<Host>) => string);
  /** Decides from the status whether a response is stored or released. @default {@link defaultFinalizationRule} */
  readonly finalizationRule?: FinalizationRule;
  /** Rewrite a response before it is stored (drop secrets). */
  readonly redact?: (response: StoredResponse, context: RecordContext<Host>) => StoredResponse;
  /**
   * Build the replay from current state instead of the stored bytes; return `undefined` to replay what was
   * stored. If it throws, the stored answer is replayed (a `hook-error` event tells), except for an
   * {@link IdemStoreUnavailableError}: what the replay needs cannot be read now, and the answer is the
   * retryable `storeUnavailable` status (503) with its message.
   */
  readonly rebuildReplay?: (
    stored: StoredResponse,
    context: RecordContext<Host>,
  ) => StoredResponse | undefined | Promise<StoredResponse | undefined>;
  /** @default the system clock */
  readonly clock?: Clock;
  /**
   * Receives every event (metrics, traces, an audit log): one listener or several, each isolated from the
   * others and from the request. Nothing is built for events when there is none.
   */
  readonly onEvent?: IdempotencyEventListeners;
}

/**
 * One request, as an adapter describes it to the coordinator: its identity (method, route template, resolved
 * path, raw query, body, content type), the key and its scope, and the framework's request as `host`.
 */
export interface IdempotentRequest<Host = unknown> extends FingerprintInput {
  /** The raw value(s) of the key header; an array of two or more is a repeated header. */
  readonly key: string | readonly string[] | undefined;
  /**
   * Who owns the key; keys in different scopes are unrelated. Anything but a string or `undefined` (a Promise,
   * the principal object) is a bug of the host's: `begin` rejects with a `TypeError` and touches nothing.
   * @default ''
   */
  readonly scope?: string | undefined;
  /**
   * Aborted when the client goes away; stops a `wait`. Read only when the request has to wait, so it may be a
   * getter that creates the signal then (see `clientGoneSignal` in `@idem/node-http`).
   */
  readonly signal?: AbortSignal | undefined;
  /** The framework's request, handed to the hooks (`redact`, `rebuildReplay`) in their context. */
  readonly host?: Host;
}

/** What the adapter does next. */
export type BeginResult<Host = unknown> =
  | {
      readonly action: 'proceed';
      /** Why no record is kept: not covered, turned off, no key, or the store failed with fail-open. */
      readonly reason: 'method' | 'disabled' | 'no-key' | 'fail-open';
    }
  /** The key is reserved under a lease: run the handler, then `finish` (or `abort`). */
  | { readonly action: 'execute'; readonly execution: LeasedExecution<Host> }
  /**
   * With `reserveIn: 'transaction'`: the key is checked, nothing is reserved yet; run the handler, which
   * reserves the key in its own transaction (`execution.reserveWith`), then `finish`.
   */
  | { readonly action: 'reserve-in-transaction'; readonly execution: TransactionalExecution<Host> }
  | { readonly action: 'replay'; readonly response: ReplayResponse }
  | { readonly action: 'reject'; readonly error: IdemError };

/**
 * Options a coordinator derived with {@link Idempotency.with} may change: all but the store. One given as
 * `undefined` keeps the base's value; `statuses` are merged status by status.
 */
export type IdempotencyOverrides<Host = unknown> = {
  readonly [Name in Exclude<keyof IdempotencyOptions<Host>, 'store'>]?:
    | IdempotencyOptions<Host>[Name]
    | undefined;
};

/** The framework-neutral coordinator. */
export interface Idempotency<Host = unknown> {
  /** The lower-case name of the key header. */
  readonly headerName: string;
  /** `true` when in-flight duplicates wait (`inFlight.strategy: 'wait'`): `begin` then wants a `signal`. */
  readonly waits: boolean;
  /** `true` when requests with this method are covered. */
  covers(method: string): boolean;
  /**
   * Decide what to do with a request: proceed, execute under a reservation, replay, or reject. Await it: it
   * answers synchronously when nothing had to wait (a store that answers synchronously, such as the memory
   * store or a replay-cache hit, or no key), else with a promise. It never throws; a failure is a rejection.
   */
  begin(request: IdempotentRequest<Host>): BeginResult<Host> | Promise<BeginResult<Host>>;
  /**
   * A coordinator with some options changed (one route's), over the same store and the same timers: the
   * store calls' deadline queue and the heartbeat are shared with this one wherever their intervals agree.
   */
  with(overrides: IdempotencyOverrides<Host>): Idempotency<Host>;
}

const DEFAULT_STATUSES: AnswerStatuses = {
  missingKey: 400,
  invalidKey: 400,
  keyReused: 422,
  inProgress: 409,
  storeUnavailable: 503,
  storeLimit: 400,
  bodyUnseen: 415,
};

/**
 * The timers of a coordinator and of those derived from it ({@link Idempotency.with}): one deadline queue per
 * store timeout, one heartbeat per interval.
 */
class Timers {
  readonly #deadlines = new Map<number, Deadlines>();
  readonly #heartbeats = new Map<number, HeartbeatScheduler>();

  deadlines(timeoutMs: number): Deadlines {
    return once(this.#deadlines, timeoutMs, () => new Deadlines(timeoutMs));
  }

  heartbeat(intervalMs: number): HeartbeatScheduler {
    return once(this.#heartbeats, intervalMs, () => new HeartbeatScheduler(intervalMs));
  }
}

/**
 * Create the coordinator that decides, for each request, whether to execute, replay or reject it.
 *
 * @example
 * const idem = createIdempotency({ store: createMemoryStore() });
 * const result = await idem.begin({ method: 'POST', route: '/orders', body, key: req.headers['idempotency-key'] });
 */
export function createIdempotency<Host = unknown>(options: IdempotencyOptions<Host>): Idempotency<Host> {
  return coordinator(options, new Timers());
}

function coordinator<Host>(options: IdempotencyOptions<Host>, timers: Timers): Idempotency<Host> {
  const { store } = options;
  const enabled = options.enabled ?? true;
  const required = options.required ?? false;
  const methods = new Set(
    (options.methods ?? ['POST', 'PUT', 'PATCH', 'DELETE']).map((m) => m.toUpperCase()),
  );
  /** Whether `method` (any case; as Node.js and fetch give it, upper case, which costs no conversion) is covered. */
  const covered = (method: string): boolean => methods.has(method) || methods.has(method.toUpperCase());
  const headerName = (options.headerName ?? 'idempotency-key').toLowerCase();
  const keyFormat = options.keyFormat ?? 'uuidv7';
  // The clock is read for a key only when something looks at the time: a custom format, or the skew check.
  const { maxFutureSkewMs } = options;
  const timeless = { nowMs: 0, maxFutureSkewMs: undefined };
  const keyContext =
    typeof keyFormat === 'function' || maxFutureSkewMs !== undefined
      ? () => ({ nowMs: clock.nowMs(), maxFutureSkewMs })
      : () => timeless;
  const lifetimeMs = positive('lifetimeMs', options.lifetimeMs ?? 86_400_000);
  const keepMs = lifetimeMs + (options.graceMs ?? 60_000);
  const leaseMs = positive('leaseMs', options.leaseMs ?? 30_000);
  const heartbeatMs =
    options.heartbeatIntervalMs === false
      ? undefined
      : positive('heartbeatIntervalMs', options.heartbeatIntervalMs ?? leaseMs / 3);
  const inFlight = options.inFlight ?? { strategy: 'reject' };
  if (inFlight.strategy === 'wait') {
    // A poll of 0 ms would never use up the wait: it would poll the store for ever.
    if (inFlight.initialPollMs !== undefined) positive('inFlight.initialPollMs', inFlight.initialPollMs);
    if (inFlight.maxPollMs !== undefined) positive('inFlight.maxPollMs', inFlight.maxPollMs);
    if (inFlight.maxWaitMs !== undefined && !(inFlight.maxWaitMs >= 0)) {
      throw new RangeError(`inFlight.maxWaitMs must be 0 or more milliseconds, got ${inFlight.maxWaitMs}`);
    }
  }
  const waits = inFlight.strategy === 'wait';
  const reserveInTransaction = options.reserveIn === 'transaction';
  const readFirst = reserveInTransaction && options.readBeforeTransaction === true;
  const statuses: AnswerStatuses = { ...DEFAULT_STATUSES, ...options.statuses };
  /** The status of a key held in flight: when a request may not wait, or waited as long as it may. */
  const inProgressStatus = waits ? (inFlight.timeoutStatus ?? statuses.inProgress) : statuses.inProgress;
  const retryAfterSeconds = options.retryAfterSeconds ?? 1;
  const failOpen = options.failMode === 'open';
  const maxBodyBytes = Math.min(
    options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES,
    store.limits?.maxBodyBytes ?? Number.POSITIVE_INFINITY,
  );
  const clock = options.clock ?? systemClock;
  const emit = safeListener(options.onEvent);
  const listening = hasListeners(emit);
  const allowHeaders = new Set((options.replayHeaders ?? DEFAULT_REPLAY_HEADERS).map((h) => h.toLowerCase()));
  for (const header of allowHeaders) {
    if (NEVER_STORED_HEADERS.has(header)) {
      throw new TypeError(`the ${header} header can never be stored for replay`);
    }
    // A record's headers are a plain object, where this name sets the prototype instead of a header: it would
    // be dropped without a word.
    if (header === '__proto__') throw new TypeError('a header named __proto__ cannot be stored for replay');
  }
  const fingerprintOf =
    typeof options.fingerprint === 'function'
      ? options.fingerprint
      : (request: IdempotentRequest<Host>) =>
          computeFingerprint(request, options.fingerprint as FingerprintOptions);
  /**
   * A body a fetch-style host may hand over that is read asynchronously: a `Blob` is hashed as the bytes it
   * holds, a `FormData` (all a framework kept of a form it parsed, its bytes gone) as its entries
   * ({@link formDataValue}).
   */
  const heldBodyFingerprint = async (
    request: IdempotentRequest<Host>,
    body: Blob | FormData,
  ): Promise<string> =>
    fingerprintOf(
      typeof options.fingerprint === 'function'
        ? request
        : isBlob(body)
          ? { ...request, body: new Uint8Array(await body.arrayBuffer()) }
          : {
              ...request,
              body: await formDataValue(body),
              contentType: withoutBoundary(request.contentType),
            },
    );

  const storeTimeoutMs = positive('storeTimeoutMs', options.storeTimeoutMs ?? 2_000);
  const deadlineOf = options.deadline;
  const calls = storeCalls({
    deadlines: timers.deadlines(storeTimeoutMs),
    emit,
    unavailableStatus: statuses.storeUnavailable,
    limitStatus: statuses.storeLimit,
    retryAfterSeconds,
  });

  /**
   * Report a decision as its event: the one place that does. `waited`: an in-flight key that the request
   * waited on (polling, or the database's lock wait) until it could wait no more.
   */
  function report(
    decision: Decision,
    attempt: Attempt<unknown>,
    durationMs: number,
    waited: boolean,
    inTransaction: boolean,
  ): void {
    if (!listening) return;
    const { scope, key, method, route } = attempt;
    const elapsedMs = performance.now() - attempt.startedMs;
    const base = { scope, key, method, route, durationMs, elapsedMs };
    switch (decision.answer) {
      case 'execute': {
        // Written out: the event of every execution (fields after a spread cost Node 20 about 0.4 µs an event).
        const { owner } = attempt;
        const { tookOver } = decision;
        emit({ type: 'reserved', scope, key, method, route, durationMs, elapsedMs, owner, tookOver });
        return;
      }
      case 'replay':
        return; // once the replay is made (refusalOrReplay): it may still turn out a refusal
      case 'mismatch':
        emit({ type: 'mismatch', ...base, status: statuses.keyReused });
        return;
      case 'in-progress':
        emit({ type: 'conflict', ...base, waited, status: inProgressStatus });
        return;
      case 'store-limit':
        // No owner: nothing was reserved.
        calls.reportFailure('reserve', decision.error, base, durationMs, { status: statuses.storeLimit });
        return;
      case 'unavailable':
        if (inTransaction) {
          // The host's transaction fails with it: the answer is the host's.
          calls.reportFailure('reserve', decision.error, attempt, durationMs);
        } else {
          const answer = failOpen ? { failedOpen: true } : { status: statuses.storeUnavailable };
          calls.reportFailure('reserve', decision.error, base, durationMs, answer);
        }
        return;
    }
  }

  /** The context hooks receive for a record of this attempt. */
  const contextOf = ({ scope, key, request }: Attempt<Host>): RecordContext<Host> => ({
    scope,
    key,
    method: request.method,
    route: request.route,
    path: request.path,
    host: request.host,
  });

  /**
   * The answer to a decision that runs nothing: a replay, or a refusal. Synchronous unless `rebuildReplay`
   * answers with a promise.
   */
  function refusalOrReplay(
    decision: Exclude<Decision, { answer: 'execute' | 'unavailable' }>,
    attempt: Attempt<Host>,
    durationMs: number,
  ): Refusal | Promise<Refusal> {
    switch (decision.answer) {
      case 'replay': {
        const stored = decision.response;
        const { rebuildReplay } = options;
        if (rebuildReplay === undefined) return replayOf(stored, attempt, durationMs);
        let rebuilding: ReturnType<typeof rebuildReplay>;
        try {
          rebuilding = rebuildReplay(stored, contextOf(attempt));
        } catch (error) {
          return notRebuilt(error, stored, attempt, durationMs);
        }
        if (!isThenable(rebuilding)) return replayOf(rebuilding ?? stored, attempt, durationMs);
        return Promise.resolve(rebuilding).then(
          (rebuilt) => replayOf(rebuilt ?? stored, attempt, durationMs),
          (error: unknown) => notRebuilt(error, stored, attempt, durationMs),
        );
      }
      case 'mismatch':
        return {
          action: 'reject',
          error: new IdemKeyReusedError('this Idempotency-Key was already used for a different request', {
            status: statuses.keyReused,
          }),
        };
      case 'in-progress':
        return {
          action: 'reject',
          error: new IdemInProgressError(
            'a request with this Idempotency-Key is still being processed; retry later',
            { status: inProgressStatus, retryAfterSeconds },
          ),
        };
      case 'store-limit':
        // A value the store cannot hold is the request's problem, fail-open or not.
        return { action: 'reject', error: storeLimitError(decision.error, statuses.storeLimit) };
    }
  }

  /** The replay of `response`, reported: the `replayed` event comes once the replay is made. */
  function replayOf(response: StoredResponse, attempt: Attempt<Host>, durationMs: number): Refusal {
    const replay = toReplayResponse(response);
    if (listening) {
      const { scope, key, method, route } = attempt;
      const elapsedMs = performance.now() - attempt.startedMs;
      emit({ type: 'replayed', scope, key, method, route, durationMs, elapsedMs, status: replay.status });
    }
    return { action: 'replay', response: replay };
  }

  /** A `rebuildReplay` that threw. */
  function notRebuilt(
    error: unknown,
    stored: StoredResponse,
    attempt: Attempt<Host>,
    durationMs: number,
  ): Refusal {
    // What the replay needs could not be read now (the hook says so with this error): the retry may get it.
    // Reported as the failed read it is, with the answer it gets, not as a replay.
    if (error instanceof IdemStoreUnavailableError) {
      const status = statuses.storeUnavailable;
      calls.reportFailure('load', error, attempt, durationMs, { status });
      const { message } = error;
      return {
        action: 'reject',
        error: new IdemStoreUnavailableError(message, { cause: error, status, retryAfterSeconds }),
      };
    }
    // The stored answer is still the right one; a newer view of it was only a courtesy.
    const { scope, key, method, route } = attempt;
    emit({ type: 'hook-error', hook: 'rebuildReplay', error, scope, key, method, route });
    return replayOf(stored, attempt, durationMs);
  }

  const runtime: ExecutionRuntime = {
    store,
    clock,
    leaseMs,
    keepMs,
    heartbeat: heartbeatMs === undefined ? undefined : timers.heartbeat(heartbeatMs),
    rule: options.finalizationRule ?? defaultFinalizationRule,
    allowHeaders,
    maxBodyBytes,
    maxExecutionMs:
      options.maxExecutionMs === undefined ? undefined : positive('maxExecutionMs', options.maxExecutionMs),
    redact: options.redact,
    emit,
    callStore: calls.call,
    finalizeIn: (params) => store.finalize(params),
    report: (decision, attempt, durationMs) =>
      report(
        decision,
        attempt,
        durationMs,
        decision.answer === 'in-progress' && decision.found === 'lock-wait',
        true,
      ),
    answerInTransaction: async (decision, attempt, durationMs) => {
      // A fault of the store fails the host's transaction with it.
      if (decision.answer === 'unavailable') throw decision.error;
      return refusalOrReplay(decision, attempt as Attempt<Host>, durationMs);
    },
  };

  /**
   * Reserve the key in the store, under the deadline: what that found, or how it failed. Synchronously when the
   * store answered synchronously (no deadline, no promise).
   */
  function reserve(attempt: Attempt<Host>): Timed<ReserveResult> | Promise<Timed<ReserveResult>> {
    const params = reserveParams(attempt, clock.nowMs(), leaseMs, keepMs);
    if (deadlineOf === undefined) return calls.timed('reserve', reserveIn, releaseLate, params);
    // Within the request's deadline too: past it, the store is not called, and the answer is the timeout's 503.
    const leftMs = deadlineFor(attempt.request as IdempotentRequest<Host>) - performance.now();
    if (!(leftMs > 0)) return { ok: false, error: new StoreTimeoutError('reserve', 0), durationMs: 0 };
    const reserving = calls.timed('reserve', reserveIn, releaseLate, params);
    if (!isThenable(reserving) || leftMs >= storeTimeoutMs) return reserving;
    return givenUpAfter(reserving, leftMs, 'reserve', (late) => releaseLate(late, params));
  }
  const reserveIn = (params: ReserveParams): MaybePromise<ReserveResult> => store.reserve(params);
  /** A reserve answered after its deadline: a reservation nobody will use is freed at once. */
  const releaseLate = (late: ReserveResult, params: ReserveParams): void => {
    if (late.outcome === 'reserved') {
      Promise.resolve()
        .then(() => store.release({ scope: params.scope, key: params.key, owner: params.owner }))
        .catch(() => {});
    }
  };

  /** What `begin` answers for a decision: it is reported, then acted on (at once, but for a replay's rebuild). */
  function answer(
    decision: Decision,
    attempt: Attempt<Host>,
    durationMs: number,
    waited: boolean,
  ): BeginResult<Host> | Promise<BeginResult<Host>> {
    report(decision, attempt, durationMs, waited, false);
    switch (decision.answer) {
      case 'execute':
        return {
          action: 'execute',
          execution: new KeyedExecution(
            runtime,
            attempt,
            'leased',
            decision.tookOver,
          ) as LeasedExecution<Host>,
        };
      case 'unavailable':
        return failOpen
          ? { action: 'proceed', reason: 'fail-open' }
          : { action: 'reject', error: calls.errorOf('reserve', decision.error) };
      default:
        return refusalOrReplay(decision, attempt, durationMs);
    }
  }

  /**
   * An in-flight key, with the `wait` strategy: poll until it is answered, freed, or the wait runs out (after
   * `maxWaitMs`, or at the request's deadline, whichever comes first).
   */
  async function waitForOther(
    attempt: Attempt<Host>,
    signal: AbortSignal | undefined,
  ): Promise<BeginResult<Host>> {
    const wait = inFlight as Extract<InFlightStrategy, { strategy: 'wait' }>;
    const maxWaitMs = wait.maxWaitMs ?? 10_000;
    const maxPollMs = wait.maxPollMs ?? 500;
    let delayMs = wait.initialPollMs ?? 25;
    // The request's deadline (on `performance.now()`'s clock, never the injected one) ends the wait too: the
    // answer comes by then, the wait's own (a poll that would start at the deadline could only time out).
    const deadline = deadlineFor(attempt.request as IdempotentRequest<Host>);
    // The budget counts planned sleeps rather than clock readings, so that an injected, frozen clock in a
    // test cannot make a request wait forever.
    for (let waitedMs = 0; waitedMs < maxWaitMs && !left(signal); ) {
      const untilDeadlineMs = deadline - performance.now();
      if (!(untilDeadlineMs > 0)) break;
      const stepMs = Math.min(delayMs, maxWaitMs - waitedMs, untilDeadlineMs);
      await sleep(stepMs, undefined, { ref: false, ...(signal ? { signal } : {}) }).catch(() => {});
      if (left(signal)) break; // the client left: nobody waits for the answer any more
      if (stepMs === untilDeadlineMs) break; // slept until the deadline: the wait ran out
      waitedMs += stepMs;
      delayMs = Math.min(delayMs * 2, maxPollMs);
      // Polling with reserve (not load) closes every gap at once: a finished request is replayed, a released
      // one is reserved afresh, a lapsed lease is taken over, all atomically.
      const decision = decide(await reserve(attempt), attempt.fingerprint);
      if (decision.answer !== 'in-progress') {
        return answer(decision, attempt, performance.now() - attempt.startedMs, false);
      }
    }
    const elapsedMs = performance.now() - attempt.startedMs;
    return answer(IN_FLIGHT, attempt, elapsedMs, true);
  }

  /**
   * Synchronous as far as it can be: a store that answers synchronously (memory, a replay-cache hit) is answered
   * without a promise. It never throws: a failure (a body that cannot be hashed) is a rejected promise.
   */
  function begin(request: IdempotentRequest<Host>): BeginResult<Host> | Promise<BeginResult<Host>> {
    try {
      if (!enabled) return { action: 'proceed', reason: 'disabled' };
      if (!covered(request.method)) return { action: 'proceed', reason: 'method' };
      if (request.key === undefined) {
        if (!required) return { action: 'proceed', reason: 'no-key' };
        return {
          action: 'reject',
          error: new IdemKeyMissingError(`the ${headerName} header is required`, {
            status: statuses.missingKey,
          }),
        };
      }
      // A scope that is no string would put every such request under one scope (a Promise, an object): the
      // host's hook is broken, and the request is refused as any other failure of the host's is (a rejection),
      // before the store is touched.
      checkScope(request.scope);
      const parsed = parseIdempotencyKey(request.key, keyFormat, keyContext());
      if (!parsed.ok) {
        return {
          action: 'reject',
          error: new IdemKeyInvalidError(`invalid ${headerName}: ${parsed.reason}`, {
            status: statuses.invalidKey,
          }),
        };
      }
      const { body } = request;
      if (body === UNSEEN_BODY && typeof options.fingerprint !== 'function') {
        return { action: 'reject', error: unseenBody(request.contentType) };
      }
      if (isBlob(body) || isFormData(body)) {
        return heldBodyFingerprint(request, body).then((fingerprint) =>
          reserveFor(attemptOf(request, parsed.key, fingerprint)),
        );
      }
      return reserveFor(attemptOf(request, parsed.key, fingerprintOf(request)));
    } catch (error) {
      return Promise.reject(error);
    }
  }

  const attemptOf = (request: IdempotentRequest<Host>, key: string, fingerprint: string): Attempt<Host> => ({
    scope: request.scope ?? '',
    key,
    method: request.method,
    route: request.route,
    fingerprint,
    owner: nextOwner(),
    startedMs: listening ? performance.now() : 0,
    request: request as Attempt<Host>['request'],
  });

  /** `begin` with the attempt made: reserve the key (or leave that to the host's transaction) and answer. */
  function reserveFor(attempt: Attempt<Host>): BeginResult<Host> | Promise<BeginResult<Host>> {
    if (reserveInTransaction) {
      if (readFirst) {
        // One read (a store with a replay cache answers it from there, and keeps what it reads), within the
        // request's deadline: past it, the transaction answers (its timeout), never this read.
        const leftMs = deadlineFor(attempt.request as IdempotentRequest<Host>) - performance.now();
        if (!(leftMs > 0)) return inTransaction(attempt);
        const read = calls.timed('load', loadIn, undefined, attempt);
        if (!isThenable(read)) return afterRead(read, attempt);
        return (leftMs < storeTimeoutMs ? givenUpAfter(read, leftMs, 'load') : read).then((found) =>
          afterRead(found, attempt),
        );
      }
      // A completed record kept in memory answers before any transaction (the store's own reserve would).
      const cached = store.replayCache?.get(attempt, clock.nowMs());
      if (cached !== undefined) return answerCompleted(cached, attempt, 0);
      return inTransaction(attempt);
    }
    const reserving = reserve(attempt);
    return isThenable(reserving)
      ? reserving.then((found) => reserved(found, attempt))
      : reserved(reserving, attempt);
  }

  /** The request's deadline, or none: a hook that throws gives none (the transaction keeps its own bound). */
  const deadlineFor = (request: IdempotentRequest<Host>): number => {
    try {
      return deadlineOf?.(request) ?? Number.POSITIVE_INFINITY;
    } catch {
      return Number.POSITIVE_INFINITY;
    }
  };

  /**
   * What `call` answered, or a timeout once `ms` have passed (a request's deadline before the store timeout): the
   * call goes on, and what it answers then goes to `onLate` (a reservation nobody will use, to free).
   */
  function givenUpAfter<T>(
    call: Promise<Timed<T>>,
    ms: number,
    operation: 'load' | 'reserve',
    onLate?: (late: T) => void,
  ): Promise<Timed<T>> {
    return new Promise((resolve) => {
      let givenUp = false;
      const timer = setTimeout(() => {
        givenUp = true;
        resolve({ ok: false, error: new StoreTimeoutError(operation, ms), durationMs: ms });
      }, ms);
      // (A timed call never rejects: it resolves with how it ended.)
      void call.then((found) => {
        clearTimeout(timer);
        if (!givenUp) resolve(found);
        else if (found.ok) onLate?.(found.value);
      });
    });
  }

  /** Handed to the handler, which reserves the key inside its own transaction. */
  const inTransaction = (attempt: Attempt<Host>): BeginResult<Host> => {
    const execution = new KeyedExecution(runtime, attempt, 'transactional', false);
    return { action: 'reserve-in-transaction', execution: execution as TransactionalExecution<Host> };
  };

  /** A completed record found before any transaction, answered as a reserve that found it would be. */
  const answerCompleted = (record: IdempotencyRecord, attempt: Attempt<Host>, durationMs: number) => {
    const found = { ok: true, value: { outcome: 'exists', record } } as const;
    return answer(decide(found, attempt.fingerprint), attempt, durationMs, false);
  };

  const loadIn = (attempt: Attempt<Host>): MaybePromise<IdempotencyRecord | undefined> =>
    store.load({ scope: attempt.scope, key: attempt.key });

  /**
   * What the read before the transaction found: a completed record that a reserve would keep is answered now;
   * anything else goes to the transaction, which decides under its lock. A fault of the read is left to the
   * transaction too, unreported: the read decides nothing, and the transaction meets the store again (and
   * reports what it meets), so that one request's outage is one event.
   */
  function afterRead(
    found: Timed<IdempotencyRecord | undefined>,
    attempt: Attempt<Host>,
  ): BeginResult<Host> | Promise<BeginResult<Host>> {
    const record = found.ok ? found.value : undefined;
    if (
      record === undefined ||
      !isCompleted(record) ||
      decideReservation(record, { nowMs: clock.nowMs(), fingerprint: attempt.fingerprint }) !== 'keep'
    )
      return inTransaction(attempt);
    return answerCompleted(record, attempt, found.durationMs);
  }

  /** What the reserve found, answered. */
  function reserved(
    found: Timed<ReserveResult>,
    attempt: Attempt<Host>,
  ): BeginResult<Host> | Promise<BeginResult<Host>> {
    const decision = decide(found, attempt.fingerprint);
    if (decision.answer === 'in-progress' && waits) {
      // (The attempt's request is the one `begin` was given: its signal is made on first read.)
      return waitForOther(attempt, (attempt.request as IdempotentRequest<Host>).signal);
    }
    // A row lock held past the database's lock wait: the request did wait, on the database.
    const waited = decision.answer === 'in-progress' && decision.found === 'lock-wait';
    return answer(decision, attempt, found.durationMs, waited);
  }

  /** The answer to a keyed body nobody read: the client's media type, or a parser the app lacks. */
  const unseenBody = (contentType: string | undefined): IdemError => {
    const type = contentType === undefined ? 'no content type' : `content type ${clip(contentType)}`;
    return new IdemBodyUnseenError(
      `a request with an ${headerName} must have a body the server reads; this one (${type}) was read by no ` +
        'body parser, so it cannot be checked against the key: send it with a content type the server parses',
      { status: statuses.bodyUnseen },
    );
  };

  return {
    headerName,
    waits,
    covers: (method) => enabled && covered(method),
    begin,
    with: (overrides) => coordinator(overridden(options, overrides), timers),
  };
}

/**
 * A coordinator's options with a route's overrides: an override given as `undefined` keeps the base's value,
 * and `statuses` are merged status by status (an API's own statuses stay when a route changes one).
 */
function overridden<Host>(
  options: IdempotencyOptions<Host>,
  overrides: IdempotencyOverrides<Host>,
): IdempotencyOptions<Host> {
  const merged: Record<string, unknown> = { ...options };
  for (const [name, value] of Object.entries(overrides)) if (value !== undefined) merged[name] = value;
  if (overrides.statuses !== undefined) merged.statuses = { ...options.statuses, ...overrides.statuses };
  return merged as unknown as IdempotencyOptions<Host>;
}

/** The value of `key` in `map`, made by `make` the first time. */
function once<K, V>(map: Map<K, V>, key: K, make: () => V): V {
  const found = map.get(key);
  if (found !== undefined) return found;
  const made = make();
  map.set(key, made);
  return made;
}

const IN_FLIGHT: Decision = { answer: 'in-progress', found: 'record' };

/** What a decision that runs nothing answers: a replay, or a refusal. */
type Refusal = Exclude<TransactionalReservation, { action: 'execute' }>;

/**
 * Owner tokens: a random prefix per process (module instance), so that no two processes mint the same token,
 * and a counter, so that no two attempts of one process do. About a fifth of the cost of a random UUID per
 * attempt; outside this process a token is no easier to guess than the prefix.
 */
const OWNER_PREFIX = randomUUID();
let owners = 0;
const nextOwner = (): string => `${OWNER_PREFIX}.${(owners++).toString(36)}`;

/** A client's header value, quoted and cut short, for a message. */
const clip = (value: string): string => JSON.stringify(value.length > 80 ? `${value.slice(0, 80)}…` : value);

const isBlob = (value: unknown): value is Blob => typeof Blob !== 'undefined' && value instanceof Blob;

/**
 * A form's media type without its multipart boundary: its entries are hashed, not the bytes the boundary
 * delimited, and a client draws a new boundary for each request it sends (a retry too).
 */
const withoutBoundary = (contentType: string | undefined): string | undefined =>
  contentType?.replace(/;\s*boundary\s*=\s*(?:"(?:[^"\\]|\\.)*"|[^;]*)/gi, '');

/** A `FormData`, by its tag: one of another implementation (a polyfill, another realm) too. */
const isFormData = (value: unknown): value is FormData =>
  Object.prototype.toString.call(value) === '[object FormData]';

/** A function, so that a check after an `await` is not narrowed away by the one before it. */
const left = (signal: AbortSignal | undefined): boolean => signal?.aborted === true;

function positive(name: string, value: number): number {
  if (!(value > 0)) {
    throw new RangeError(`${name} must be a positive number of milliseconds, got ${value}`);
  }
  return value;
}
