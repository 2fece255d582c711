import type { Executor } from './executor.js';

/**
 * A database call that did not answer in time: the database is hung or the network to it is partitioned. Its
 * `code` is the one a socket timeout has, so that it is answered like any unreachable database (a 503).
 */
export class DatabaseTimeout extends Error {
  readonly code = 'ETIMEDOUT';
  constructor(what: string, timeoutMs: number) {
    super(`the database did not answer ${what} within ${timeoutMs} ms`);
  }
}

/** `call()`, or a DatabaseTimeout once `timeoutMs` have passed. The late result, if any, is dropped. */
export function within<T>(timeoutMs: number, what: string, call: () => Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new DatabaseTimeout(what, timeoutMs)), timeoutMs);
  });
  return Promise.race([call(), late]).finally(() => clearTimeout(timer));
}

const STORE_CALLS = new Set(['reserve', 'load', 'finalize', 'release', 'renewLease', 'purgeExpired']);

/** The same store, each of its calls bounded (`inTransaction` and the rest pass through). */
export function boundedStore<T extends object>(store: T, timeoutMs: number): T {
  return new Proxy(store, {
    get(target, property, receiver) {
      const value: unknown = Reflect.get(target, property, receiver);
      if (typeof value !== 'function' || typeof property !== 'string' || !STORE_CALLS.has(property))
        return value;
      return (...args: unknown[]) =>
        within(timeoutMs, `the idempotency store's ${property}`, async () => value.apply(target, args));
    },
  });
}

/** The same executor, each statement bounded. */
export function boundedExecutor(executor: Executor, timeoutMs: number): Executor {
  return {
    lock: executor.lock,
    rows: (statement) => within(timeoutMs, 'a statement', () => executor.rows(statement)),
    run: (statement) => within(timeoutMs, 'a statement', () => executor.run(statement)),
    idempotency: boundedStore(executor.idempotency, timeoutMs),
  };
}

/**
 * Run a driver's transaction with its two waits bounded that no statement timeout covers: getting a connection
 * (a pool whose connections all hang, a connect that goes unanswered), and ending the transaction (COMMIT or
 * ROLLBACK on a connection that went silent). Past either, the caller gets a DatabaseTimeout: a transaction whose
 * end is unknown answers a retryable 503 (a retry then replays the commit, or runs again where none happened).
 * A body whose connection came too late is never run.
 */
export function boundedTransaction<T>(
  run: (body: (tx: Executor) => Promise<T>) => Promise<T>,
  body: (tx: Executor) => Promise<T>,
  bounds: { readonly acquireTimeoutMs: number; readonly endTimeoutMs: number },
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    let abandoned = false;
    let timer: NodeJS.Timeout | undefined;
    const abandon = (error: DatabaseTimeout) => {
      abandoned = true;
      reject(error);
    };
    timer = setTimeout(
      () => abandon(new DatabaseTimeout('with a connection', bounds.acquireTimeoutMs)),
      bounds.acquireTimeoutMs,
    );
    const ending = () => {
      clearTimeout(timer);
      timer = setTimeout(
        () => abandon(new DatabaseTimeout('the end of a transaction', bounds.endTimeoutMs)),
        bounds.endTimeoutMs,
      );
    };
    run(async (tx) => {
      if (abandoned) throw new DatabaseTimeout('with a connection', bounds.acquireTimeoutMs);
      clearTimeout(timer);
      try {
        const result = await body(tx);
        ending();
        return result;
      } catch (error) {
        ending();
        throw error;
      }
    }).then(
      (result) => {
        clearTimeout(timer);
        resolve(result);
      },
      (error: unknown) => {
        clearTimeout(timer);
        reject(error);
      },
    );
  });
}
