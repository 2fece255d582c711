/** A mutex: tasks run one at a time, in the order they were handed in. */
export interface Exclusive {
  <T>(task: () => Promise<T>): Promise<T>;
  /** `true` while no task is running or waiting: nothing holds the connection (no transaction is open on it). */
  readonly idle: boolean;
}

export function exclusive(): Exclusive {
  let tail: Promise<unknown> = Promise.resolve();
  let holding = 0;
  const release = () => {
    holding--;
  };
  const turn = <T>(task: () => Promise<T>): Promise<T> => {
    holding++;
    const run = tail.then(task, task);
    tail = run.then(release, release);
    return run;
  };
  return Object.defineProperty(turn, 'idle', { get: () => holding === 0 }) as Exclusive;
}

type AsyncMethods<T> = {
  [K in keyof T]: T[K] extends (...args: infer A) => Promise<infer R> ? (...args: A) => Promise<R> : T[K];
};

/**
 * `target` with every async method run through `turn`: on a single SQLite connection, the idempotency store's
 * calls must take their turn with the catalog's transactions, or one could land inside another's open
 * transaction. Any method of the SPI, present or future, is covered; other properties pass through.
 *
 * `readsAtOnce` names reads that run at once, without waiting for a turn, when the connection is idle: no
 * transaction is open on it then, so a read sees only what was committed (better-sqlite3 answers at once, and
 * the read is answered without a promise).
 */
export function serialized<T extends object>(
  target: T,
  turn: Exclusive | (<R>(task: () => Promise<R>) => Promise<R>),
  readsAtOnce: readonly (keyof T)[] = [],
): AsyncMethods<T> {
  return new Proxy(target, {
    get(object, property, receiver) {
      const value: unknown = Reflect.get(object, property, receiver);
      if (typeof value !== 'function') return value;
      const inTurn = (...args: unknown[]) => turn(() => Promise.resolve(value.apply(object, args)));
      if (!readsAtOnce.includes(property as keyof T) || !('idle' in turn)) return inTurn;
      return (...args: unknown[]) => (turn.idle ? value.apply(object, args) : inTurn(...args));
    },
  }) as AsyncMethods<T>;
}
