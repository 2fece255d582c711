import type { IdempotencyEvent, IdempotencyEventListener } from '@idem/core';
import { register } from 'prom-client';
import { BoundedLabel, methodLabel, NONE, statusLabel } from './labels.js';
import { type AnyRegistry, Series } from './series.js';

export type { AnyRegistry } from './series.js';

/** Options of {@link createIdempotencyMetrics}. */
export interface IdempotencyMetricsOptions {
  /** Where the series are registered. @default prom-client's default `register` */
  readonly registry?: AnyRegistry;
  /**
   * The `operation` label of a request: return a name of your own (an API's operation id), or the route
   * template. Never return anything with a path's values or a key in it. It is asked once per method and
   * route (the answer is remembered), so it must answer the same every time. @default the route template
   */
  readonly operation?: (request: { readonly method: string; readonly route: string }) => string;
  /** Distinct `operation` values kept; later new ones are counted as `other`. @default 100 */
  readonly maxOperations?: number;
  /** Buckets of `idempotency_processing_duration_seconds`, in seconds. @default 5 ms … 10 s */
  readonly buckets?: readonly number[];
  /**
   * Executions followed at once (to pair each end with its reservation); past this the oldest is forgotten
   * and leaves the active-keys gauge. Only a host that never finishes its executions gets near it.
   * @default 100_000
   */
  readonly maxTracked?: number;
}

/** The collector: pass `onEvent` to everything that emits events. */
export interface IdempotencyMetrics {
  /**
   * The listener for `onEvent` of the coordinator (or its adapter), the purge scheduler and a store. Cheap
   * and synchronous: it only counts.
   */
  readonly onEvent: IdempotencyEventListener;
  /** Remove every series of this collector from its registry. */
  remove(): void;
}

/** The default buckets (s): they hold the catalog's latency targets (20, 50, 100 ms) and the alert lines (200, 500 ms). */
export const DEFAULT_BUCKETS_SECONDS: readonly number[] = [
  0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10,
];

/** `error_type` values of `idempotency_errors_total`. */
export const ErrorType = {
  /** The store failed or timed out (a `store-error` event). */
  StoreUnavailable: 'store_unavailable',
  /** The store cannot hold a value (a `store-limit` event). */
  StoreLimit: 'store_limit',
  /** A host hook threw (`redact`, `rebuildReplay`, the finalization rule). */
  HookError: 'hook_error',
  /** An execution lost its reservation to another request. */
  LeaseLost: 'lease_lost',
} as const;

/** The `operation` of purge runs, which belong to no request. */
export const PURGE_OPERATION = 'purge';

/** What is known of an execution between its reservation and its end. */
interface Tracked {
  readonly operation: string;
  readonly method: string;
  readonly decisionMs: number;
  /** Set once the execution's lost lease is counted: the heartbeat and the finalize may both report it. */
  leaseLost?: true;
  /** Set once a store limit at its finalize is counted: each smaller record it tried may report one. */
  storeLimited?: true;
}

/** Owners whose lost lease was counted after they were forgotten (past `maxTracked`), remembered this long. */
const MAX_UNTRACKED_LOSSES = 1_024;
/** (route, method) pairs whose `operation` is remembered; past it, `operation` is asked again each time. */
const MAX_NAMED = 1_024;

/**
 * Register idempotency's series on a prom-client registry and return the event listener that feeds them.
 * Label values are bounded: methods are upper-case words, statuses 100–599 (else `none`), operations the
 * first `maxOperations` route templates (else `other`); keys, scopes and paths are never labels.
 *
 * @example
 * const metrics = createIdempotencyMetrics({ registry });
 * app.register(fastifyIdempotency, { store, onEvent: [metrics.onEvent] });
 * startPurgeScheduler({ store, onEvent: metrics.onEvent });
 */
export function createIdempotencyMetrics(options: IdempotencyMetricsOptions = {}): IdempotencyMetrics {
  const registers = [options.registry ?? register];
  const operations = new BoundedLabel(options.maxOperations ?? 100);
  const nameOf = options.operation ?? (({ route }) => route);
  const maxTracked = options.maxTracked ?? 100_000;
  const tracked = new Map<string, Tracked>();
  /** Owners not tracked any more whose lost lease was counted: their finalize or release reports it again. */
  const untrackedLosses = new Set<string>();
  const rememberLoss = (owner: string): void => {
    if (untrackedLosses.size >= MAX_UNTRACKED_LOSSES) {
      const [oldest] = untrackedLosses;
      if (oldest !== undefined) untrackedLosses.delete(oldest);
    }
    untrackedLosses.add(owner);
  };

  const names: string[] = [];
  const counter = <L extends string>(name: string, help: string, labelNames: readonly L[] = []) => {
    names.push(name);
    return new Series<L>({ name, help, type: 'counter', labelNames, registers });
  };
  const requests = counter(
    'idempotency_requests_total',
    'Keyed requests answered, by the status of the answer (the handler’s, the stored one, or the coordinator’s own).',
    ['method', 'status', 'operation'],
  );
  const errors = counter(
    'idempotency_errors_total',
    'Failures, by error_type: store_unavailable, store_limit, hook_error, lease_lost.',
    ['error_type', 'operation'],
  );
  names.push('idempotency_processing_duration_seconds');
  const duration = new Series({
    type: 'histogram',
    name: 'idempotency_processing_duration_seconds',
    help: 'From begin to the answer (an executed request: until its response was stored or its key released), in seconds.',
    labelNames: ['operation', 'status'] as const,
    buckets: [...(options.buckets ?? DEFAULT_BUCKETS_SECONDS)],
    registers,
  });
  const cacheHits = counter(
    'idempotency_cache_hits_total',
    'Store lookups that its read cache answered, by store call (reserve, load).',
    ['operation'],
  );
  const cacheMisses = counter(
    'idempotency_cache_misses_total',
    'Store lookups that its read cache could not answer, by store call (reserve, load).',
    ['operation'],
  );
  names.push('idempotency_active_keys_count');
  const activeKeys = new Series({
    type: 'gauge',
    name: 'idempotency_active_keys_count',
    help: 'Keys reserved by this process whose execution has not ended yet.',
    labelNames: ['operation'] as const,
    registers,
  });
  const replays = counter('idempotency_replays_total', 'Retries answered with a stored response.', [
    'operation',
  ]);
  const conflicts = counter(
    'idempotency_conflicts_total',
    'Requests refused because their key was still in flight (waited: after waiting for it).',
    ['operation', 'waited'],
  );
  const mismatches = counter('idempotency_mismatches_total', 'Keys reused for a different request.', [
    'operation',
  ]);
  const takeovers = counter(
    'idempotency_lease_takeovers_total',
    'Reservations taken over after their lease lapsed (a crashed or stalled request).',
    ['operation'],
  );
  const leaseLosses = counter(
    'idempotency_lease_losses_total',
    'Executions that found their reservation taken over, by where they found out.',
    ['operation', 'phase'],
  );
  const storeErrors = counter(
    'idempotency_store_errors_total',
    'Store calls that failed or timed out, by call; failed_open: the request went on without a record.',
    ['store_operation', 'failed_open'],
  );
  const purged = counter(
    'idempotency_purged_records_total',
    'Expired records deleted by the purge scheduler.',
  );
  const evicted = counter(
    'idempotency_evicted_records_total',
    'Completed records that a bounded store dropped before their lifetime ended (a retry executes again).',
  );

  /** The `operation` of each (route, method) seen, bounded: `nameOf` is called once per pair. */
  const named = new Map<string, Map<string, string>>();
  let namedCount = 0;
  const operationOf = (method: string | undefined, route: string | undefined): string => {
    if (method === undefined || route === undefined) return NONE;
    let byMethod = named.get(route);
    const known = byMethod?.get(method);
    if (known !== undefined) return known;
    let name: unknown;
    try {
      name = nameOf({ method, route });
    } catch {
      name = undefined;
    }
    // A function that failed, or answered no string, is asked again next time: its fallback is not kept.
    if (typeof name !== 'string') return operations.of(route);
    const operation = operations.of(name);
    if (namedCount < MAX_NAMED) {
      if (byMethod === undefined) {
        byMethod = new Map();
        named.set(route, byMethod);
      }
      byMethod.set(method, operation);
      namedCount++;
    }
    return operation;
  };

  /** One answered request: its rate, status and duration. */
  const answered = (method: string, operation: string, status: string, seconds?: number): void => {
    requests.inc({ method, status, operation });
    if (seconds !== undefined) duration.observe({ operation, status }, Math.max(0, seconds));
  };

  const track = (owner: string, entry: Tracked): void => {
    if (tracked.size >= maxTracked) {
      const [oldest] = tracked;
      if (oldest !== undefined) {
        tracked.delete(oldest[0]);
        activeKeys.dec({ operation: oldest[1].operation });
        if (oldest[1].leaseLost === true) rememberLoss(oldest[0]);
      }
    }
    tracked.set(owner, entry);
    activeKeys.inc({ operation: entry.operation });
  };

  /** The end of an execution: counted once, however many events report it. */
  const ended = (owner: string | undefined, status: number | undefined, executionMs: number): void => {
    const entry = owner === undefined ? undefined : tracked.get(owner);
    if (entry === undefined) return;
    tracked.delete(owner as string);
    activeKeys.dec({ operation: entry.operation });
    answered(entry.method, entry.operation, statusLabel(status), (entry.decisionMs + executionMs) / 1000);
  };

  const onEvent = (event: IdempotencyEvent): void => {
    switch (event.type) {
      case 'reserved': {
        const operation = operationOf(event.method, event.route);
        if (event.tookOver) takeovers.inc({ operation });
        track(event.owner, { operation, method: methodLabel(event.method), decisionMs: event.elapsedMs });
        return;
      }
      case 'replayed': {
        const operation = operationOf(event.method, event.route);
        replays.inc({ operation });
        answered(methodLabel(event.method), operation, statusLabel(event.status), event.elapsedMs / 1000);
        return;
      }
      case 'conflict': {
        const operation = operationOf(event.method, event.route);
        conflicts.inc({ operation, waited: String(event.waited) });
        answered(methodLabel(event.method), operation, statusLabel(event.status), event.elapsedMs / 1000);
        return;
      }
      case 'mismatch': {
        const operation = operationOf(event.method, event.route);
        mismatches.inc({ operation });
        answered(methodLabel(event.method), operation, statusLabel(event.status), event.elapsedMs / 1000);
        return;
      }
      case 'finalized':
        // A response kept without what the store could not hold: one refusal, however many tries it took
        // (counted at the first refusal already, when the execution is tracked).
        if (event.omitted !== undefined && tracked.get(event.owner)?.storeLimited !== true) {
          errors.inc({ error_type: ErrorType.StoreLimit, operation: operationOf(event.method, event.route) });
        }
        ended(event.owner, event.status, event.executionMs);
        return;
      case 'released':
        if (event.reason === 'unstorable' && tracked.get(event.owner)?.storeLimited !== true) {
          errors.inc({ error_type: ErrorType.StoreLimit, operation: operationOf(event.method, event.route) });
        }
        ended(event.owner, event.status, event.executionMs);
        return;
      case 'held':
        // Its work's outcome is unknown: the key stays in flight in the store, but this node is done with it.
        ended(event.owner, undefined, event.executionMs);
        return;
      case 'lease-lost': {
        // Counted per execution, where it first found out: a heartbeat that finds the key taken and the
        // finalize that then fails report one lost lease.
        const entry = tracked.get(event.owner);
        const counted = entry === undefined ? untrackedLosses.has(event.owner) : entry.leaseLost === true;
        if (!counted) {
          const operation = operationOf(event.method, event.route);
          leaseLosses.inc({ operation, phase: event.phase });
          errors.inc({ error_type: ErrorType.LeaseLost, operation });
          if (entry !== undefined) entry.leaseLost = true;
          else if (event.phase === 'heartbeat') rememberLoss(event.owner);
        }
        if (entry === undefined && event.phase !== 'heartbeat') untrackedLosses.delete(event.owner);
        if (event.phase !== 'heartbeat') ended(event.owner, event.status, event.executionMs);
        return;
      }
      case 'store-error': {
        const operation =
          event.operation === 'purgeExpired' ? PURGE_OPERATION : operationOf(event.method, event.route);
        storeErrors.inc({ store_operation: event.operation, failed_open: String(event.failedOpen) });
        errors.inc({ error_type: ErrorType.StoreUnavailable, operation });
        if (event.operation === 'finalize' || event.operation === 'release') {
          ended(event.owner, undefined, event.durationMs);
        } else if (event.status !== undefined) {
          // Answered with it: a reserve that failed, or a replay whose read failed (answered 503).
          answered(methodLabel(event.method), operation, statusLabel(event.status), event.durationMs / 1000);
        }
        return;
      }
      case 'store-limit': {
        if (event.operation === 'finalize') {
          // Counted once per execution, at its first refusal: whatever ends it next (kept smaller, released, a
          // fault or a lost lease on the smaller record). An execution not tracked is counted at its end.
          const entry = event.owner === undefined ? undefined : tracked.get(event.owner);
          if (entry !== undefined && entry.storeLimited !== true) {
            entry.storeLimited = true;
            errors.inc({
              error_type: ErrorType.StoreLimit,
              operation: operationOf(event.method, event.route),
            });
          }
          return;
        }
        const operation = operationOf(event.method, event.route);
        errors.inc({ error_type: ErrorType.StoreLimit, operation });
        if (event.status !== undefined)
          answered(methodLabel(event.method), operation, statusLabel(event.status));
        return;
      }
      case 'hook-error':
        errors.inc({ error_type: ErrorType.HookError, operation: operationOf(event.method, event.route) });
        return;
      case 'cache':
        (event.outcome === 'hit' ? cacheHits : cacheMisses).inc({ operation: event.operation });
        return;
      case 'purged':
        purged.inc({}, event.count);
        return;
      case 'evicted':
        evicted.inc();
        return;
    }
  };

  return {
    onEvent,
    remove() {
      for (const registry of registers) {
        for (const name of names) registry.removeSingleMetric(name);
      }
    },
  };
}
