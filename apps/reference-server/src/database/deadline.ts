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

/**
 * A COMMIT that did not answer in time: the transaction may have committed or not. Not a plain fault (a 503
 * would tell a client without an idempotency key to run the mutation again, which may apply it twice): the
 * catalog answers Iceberg's CommitStateUnknownException (500), and a request with a key the retryable 503, since
 * its retry replays what committed or runs what did not.
 */
export class CommitOutcomeUnknown extends Error {
  readonly code = 'ECOMMITUNKNOWN';
  constructor(timeoutMs: number) {
    super(`the database did not confirm the commit within ${timeoutMs} ms: whether it committed is unknown`);
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
 * ROLLBACK on a connection that went silent). Past the first, or a ROLLBACK's, the caller gets a DatabaseTimeout
 * (nothing was committed: a retryable 503); past a COMMIT's, a CommitOutcomeUnknown. A body whose connection came
 * too late is never run.
 */
export function boundedTransaction<T>(
  run: (body: (tx: Executor) => Promise<T>) => Promise<T>,
  body: (tx: Executor) => Promise<T>,
  bounds: { readonly acquireTimeoutMs: number; readonly endTimeoutMs: number },
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    let abandoned = false;
    let timer: NodeJS.Timeout | undefined;
    const abandon = (error: Error) => {
      abandoned = true;
      reject(error);
    };
    timer = setTimeout(
      () => abandon(new DatabaseTimeout('with a connection', bounds.acquireTimeoutMs)),
      bounds.acquireTimeoutMs,
    );
    const ending = (committing: boolean) => {
      clearTimeout(timer);
      timer = setTimeout(
        () =>
          abandon(
            committing
              ? new CommitOutcomeUnknown(bounds.endTimeoutMs)
              : new DatabaseTimeout('the end of a transaction', bounds.endTimeoutMs),
          ),
        bounds.endTimeoutMs,
      );
    };
    run(async (tx) => {
      if (abandoned) throw new DatabaseTimeout('with a connection', bounds.acquireTimeoutMs);
      clearTimeout(timer);
      try {
        const result = await body(tx);
        ending(true);
        return result;
      } catch (error) {
        ending(false);
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
