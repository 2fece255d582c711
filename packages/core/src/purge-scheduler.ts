import { type IdempotencyEventListeners, safeListener } from './events.js';
import { type Clock, type IdempotencyStore, systemClock } from './types.js';

export interface PurgeOnceOptions {
  /** Records with `expiresAtMs < beforeMs` go. */
  readonly beforeMs: number;
  /** Records deleted per store call. @default 1_000 */
  readonly batchSize?: number;
  /** Stop after this many batches even if more remain, so one run stays bounded. @default 1_000 */
  readonly maxBatches?: number;
  /** Called after each batch with the count it deleted (a progress line); it must not throw. */
  readonly onBatch?: (deleted: number) => void;
}

/**
 * Purge expired records in batches until a batch comes back short (or `maxBatches` is reached).
 * Returns the total count and the number of store calls.
 */
export async function purgeExpiredInBatches(
  store: IdempotencyStore,
  options: PurgeOnceOptions,
): Promise<{ count: number; batches: number }> {
  const limit = options.batchSize ?? 1_000;
  const maxBatches = options.maxBatches ?? 1_000;
  let count = 0;
  let batches = 0;
  while (batches < maxBatches) {
    const deleted = await store.purgeExpired({ beforeMs: options.beforeMs, limit });
    count += deleted;
    batches++;
    options.onBatch?.(deleted);
    if (deleted < limit) break;
  }
  return { count, batches };
}

export interface PurgeSchedulerOptions {
  readonly store: IdempotencyStore;
  /** Mean time between runs, in ms. @default 60_000 */
  readonly intervalMs?: number;
  /** Each delay is `intervalMs` ± this fraction, so many nodes do not purge in lockstep. @default 0.2 */
  readonly jitter?: number;
  /** @default 1_000 */
  readonly batchSize?: number;
  /** @default 1_000 */
  readonly maxBatches?: number;
  /** @default the system clock */
  readonly clock?: Clock;
  /** Receive a `purged` event after each run and a `store-error` event when one fails: one listener or several. */
  readonly onEvent?: IdempotencyEventListeners;
}

/**
 * Purge expired records periodically on an unref'd timer (it never keeps the process alive). Returns a stop
 * function that cancels the next run and resolves once a run in progress has finished.
 *
 * @example
 * const stop = startPurgeScheduler({ store, intervalMs: 60_000 });
 * process.on('SIGTERM', () => void stop());
 */
export function startPurgeScheduler(options: PurgeSchedulerOptions): () => Promise<void> {
  const intervalMs = options.intervalMs ?? 60_000;
  const jitter = options.jitter ?? 0.2;
  const clock = options.clock ?? systemClock;
  const emit = safeListener(options.onEvent);
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> | undefined;
  let stopped = false;

  const schedule = (): void => {
    if (stopped) return;
    const delayMs = intervalMs * (1 + jitter * (2 * Math.random() - 1));
    timer = setTimeout(() => {
      running = runOnce().finally(() => {
        running = undefined;
        schedule();
      });
    }, delayMs);
    timer.unref();
  };

  const runOnce = async (): Promise<void> => {
    const startedMs = performance.now();
    try {
      const { count, batches } = await purgeExpiredInBatches(options.store, {
        beforeMs: clock.nowMs(),
        ...(options.batchSize === undefined ? {} : { batchSize: options.batchSize }),
        ...(options.maxBatches === undefined ? {} : { maxBatches: options.maxBatches }),
      });
      emit({ type: 'purged', count, batches, durationMs: performance.now() - startedMs });
    } catch (error) {
      emit({
        type: 'store-error',
        operation: 'purgeExpired',
        error,
        durationMs: performance.now() - startedMs,
        failedOpen: false,
      });
    }
  };

  schedule();
  return async () => {
    stopped = true;
    clearTimeout(timer);
    await running;
  };
}
