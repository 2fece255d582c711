/** A mutex: tasks run one at a time, in the order they were handed in. */
export type Exclusive = <T>(task: () => Promise<T>) => Promise<T>;

export function exclusive(): Exclusive {
  let tail: Promise<unknown> = Promise.resolve();
  return <T>(task: () => Promise<T>): Promise<T> => {
    const run = tail.then(task, task);
    tail = run.catch(() => {});
    return run;
  };
}

type AsyncMethods<T> = {
  [K in keyof T]: T[K] extends (...args: infer A) => Promise<infer R> ? (...args: A) => Promise<R> : T[K];
};

/**
 * `target` with every async method run through `turn`: on a single SQLite connection, the idempotency store's
 * calls must take their turn with the catalog's transactions, or one could land inside another's open
 * transaction. Any method of the SPI, present or future, is covered; other properties pass through.
 */
export function serialized<T extends object>(target: T, turn: Exclusive): AsyncMethods<T> {
  return new Proxy(target, {
    get(object, property, receiver) {
      const value: unknown = Reflect.get(object, property, receiver);
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => turn(() => Promise.resolve(value.apply(object, args)));
    },
  }) as AsyncMethods<T>;
}
