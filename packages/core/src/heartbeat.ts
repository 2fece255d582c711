/** What the heartbeat renews: an execution that knows when it last set its lease. */
export interface Renewable {
  /** When the lease was last set, on the monotonic clock (ms). */
  readonly renewedAtMs: number;
  /**
   * Renew the lease now (the call reports its own outcome). It may remove only itself from the scheduler
   * synchronously: the tick's loop relies on that.
   */
  beat(): void;
  /** Where the scheduler holds it, or -1: the scheduler's own bookkeeping, starting at -1. */
  heartbeatSlot: number;
}

/**
 * One timer for every running execution of a coordinator, instead of one per request: it ticks every half
 * interval while anything runs, and renews each execution whose lease was last set an interval ago or more.
 * (With the default lease of three intervals, a lease is renewed at the latest 1.5 intervals after it was
 * set, well before it lapses.)
 *
 * Executions are held in an array, each knowing its slot, so that adding and removing one (twice per request)
 * allocates nothing: a removed one's slot takes the last one.
 */
export class HeartbeatScheduler {
  readonly #intervalMs: number;
  readonly #running: Renewable[] = [];
  #timer: NodeJS.Timeout | undefined;

  constructor(intervalMs: number) {
    this.#intervalMs = intervalMs;
  }

  add(execution: Renewable): void {
    if (execution.heartbeatSlot !== -1) return;
    execution.heartbeatSlot = this.#running.length;
    this.#running.push(execution);
    if (this.#timer === undefined) {
      this.#timer = setInterval(() => this.#tick(), this.#intervalMs / 2);
      this.#timer.unref();
    }
  }

  remove(execution: Renewable): void {
    // The timer stops at its next tick if nothing runs by then: stopping and starting it around every short
    // request would cost more than the requests themselves. It is unref'd, so it never holds the process.
    const slot = execution.heartbeatSlot;
    const running = this.#running;
    if (slot === -1 || running[slot] !== execution) return;
    execution.heartbeatSlot = -1;
    const last = running.pop() as Renewable;
    if (last !== execution) {
      running[slot] = last;
      last.heartbeatSlot = slot;
    }
  }

  /** How many executions it renews now. */
  get size(): number {
    return this.#running.length;
  }

  #tick(): void {
    const running = this.#running;
    if (running.length === 0) {
      clearInterval(this.#timer);
      this.#timer = undefined;
      return;
    }
    const dueMs = performance.now() - this.#intervalMs;
    // Backwards: an execution that leaves during its beat moves the last one, already visited, into its slot.
    for (let slot = running.length - 1; slot >= 0; slot--) {
      const execution = running[slot];
      if (execution !== undefined && execution.renewedAtMs <= dueMs) execution.beat();
    }
  }
}
