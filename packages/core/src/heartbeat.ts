/** What the heartbeat renews: an execution that knows when it last set its lease. */
export interface Renewable {
  /** When the lease was last set, on the monotonic clock (ms). */
  readonly renewedAtMs: number;
  /** Renew the lease now (the call reports its own outcome). */
  beat(): void;
}

/**
 * One timer for every running execution of a coordinator, instead of one per request: it ticks every half
 * interval while anything runs, and renews each execution whose lease was last set an interval ago or more.
 * (With the default lease of three intervals, a lease is renewed at the latest 1.5 intervals after it was
 * set, well before it lapses.)
 */
export class HeartbeatScheduler {
  readonly #intervalMs: number;
  readonly #running = new Set<Renewable>();
  #timer: NodeJS.Timeout | undefined;

  constructor(intervalMs: number) {
    this.#intervalMs = intervalMs;
  }

  add(execution: Renewable): void {
    this.#running.add(execution);
    if (this.#timer === undefined) {
      this.#timer = setInterval(() => this.#tick(), this.#intervalMs / 2);
      this.#timer.unref();
    }
  }

  remove(execution: Renewable): void {
    // The timer stops at its next tick if nothing runs by then: stopping and starting it around every short
    // request would cost more than the requests themselves. It is unref'd, so it never holds the process.
    this.#running.delete(execution);
  }

  /** How many executions it renews now. */
  get size(): number {
    return this.#running.size;
  }

  #tick(): void {
    if (this.#running.size === 0) {
      clearInterval(this.#timer);
      this.#timer = undefined;
      return;
    }
    const dueMs = performance.now() - this.#intervalMs;
    for (const execution of this.#running) {
      if (execution.renewedAtMs <= dueMs) execution.beat();
    }
  }
}
