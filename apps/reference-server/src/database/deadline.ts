import type { Executor } from './executor.js';

/**
 * A database call that did not answer in time: the database is hung or the network to it is partitioned, or the
 * request's deadline came first. Its `code` is the one a socket timeout has, so that it is answered like any
 * unreachable database (a 503).
 */
export class DatabaseTimeout extends Error {
  readonly code = 'ETIMEDOUT';
  constructor(what: string, timeoutMs: number) {
    super(
      timeoutMs > 0
        ? `the database did not answer ${what} within ${Math.round(timeoutMs)} ms`
        : `no time was left before the request's deadline (${what})`,
    );
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
  constructor(timeoutMs: number, options?: { cause?: unknown }) {
    super(
      `the database did not confirm the commit within ${Math.max(0, Math.round(timeoutMs))} ms: whether it committed is unknown`,
      options,
    );
  }
}

/**
 * When a request must be answered by, in `performance.now()` ms: its arrival plus REQUEST_TIMEOUT_MS. Every wait
 * of the request (a connection, each statement, the COMMIT) gets the smaller of its own bound and the time left.
 * `NO_DEADLINE` for the calls no request makes (startup, the purge).
 */
export type Deadline = number;
export const NO_DEADLINE: Deadline = Number.POSITIVE_INFINITY;

/** The bound of one wait: its own, or the time left before `deadline` when that is shorter (≤ 0: none left). */
export const boundOf = (ownMs: number, deadline: Deadline): number =>
  Math.min(ownMs, deadline - performance.now());

/**
 * `call()`, or a DatabaseTimeout once `timeoutMs` (or the time left before `deadline`) have passed; with no time
 * left, `call` is not made at all. The late result, if any, is dropped; `onAbandon` runs when the timer wins.
 */
export function within<T>(
  timeoutMs: number,
  what: string,
  call: () => Promise<T>,
  deadline: Deadline = NO_DEADLINE,
  onAbandon?: () => void,
): Promise<T> {
  const limitMs = boundOf(timeoutMs, deadline);
  if (limitMs <= 0) return Promise.reject(new DatabaseTimeout(what, 0));
  return new Promise<T>((resolve, reject) => {
    let settled = false;
    const timer = setTimeout(() => {
      if (settled) return;
      settled = true;
      onAbandon?.();
      reject(new DatabaseTimeout(what, limitMs));
    }, Math.ceil(limitMs));
    let running: Promise<T>;
    try {
      running = Promise.resolve(call());
    } catch (error) {
      running = Promise.reject(error);
    }
    running.then(
      (value) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        resolve(value);
      },
      (error: unknown) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        reject(error);
      },
    );
  });
}

const STORE_CALLS = new Set(['reserve', 'load', 'finalize', 'release', 'renewLease', 'purgeExpired']);

/** A bound on calls: `run(what, call)` runs `call` within its own bound and the time left. */
export type Bounded = <T>(what: string, call: () => Promise<T>) => Promise<T>;

/** A `Bounded` of `timeoutMs` and `deadline`, nothing else. */
export const boundedBy =
  (timeoutMs: number, deadline: Deadline = NO_DEADLINE): Bounded =>
  (what, call) =>
    within(timeoutMs, what, call, deadline);

/** The same store, each of its calls bounded (`inTransaction` and the rest pass through). */
export function boundedStore<T extends object>(store: T, bounded: Bounded): T {
  return new Proxy(store, {
    get(target, property, receiver) {
      const value: unknown = Reflect.get(target, property, receiver);
      if (typeof value !== 'function' || typeof property !== 'string' || !STORE_CALLS.has(property))
        return value;
      return (...args: unknown[]) =>
        bounded(`the idempotency store's ${property}`, async () => value.apply(target, args));
    },
  });
}

/** The same executor, each statement bounded. */
export function boundedExecutor(executor: Executor, bounded: Bounded): Executor {
  return {
    lock: executor.lock,
    rows: (statement) => bounded('a statement', () => executor.rows(statement)),
    run: (statement) => bounded('a statement', () => executor.run(statement)),
    idempotency: boundedStore(executor.idempotency, bounded),
  };
}

/** One connection checked out of a pool, as a request's deadline drives it (see database/pool.ts). */
export interface PooledConnection {
  /** Statements on this connection, unbounded. */
  readonly executor: Executor;
  /** Before statements outside a transaction: the database stops each after `serverMs`, where it can. */
  prepare(serverMs: number): Promise<void>;
  /**
   * Begin a transaction whose statements the database itself stops after `serverMs` (the session's own
   * statement timeout when that is shorter).
   */
  begin(serverMs: number): Promise<void>;
  commit(): Promise<void>;
  rollback(): Promise<void>;
  /** Back to the pool, for the next request. */
  release(): void;
  /** Closed at once, never used again: a call on it was given up on, and its answer may still come. */
  destroy(): void;
}

export interface ConnectionBounds {
  /** The longest a request waits for a connection, opening one included. */
  readonly acquireTimeoutMs: number;
  /** The longest the client waits for one statement's answer (COMMIT and ROLLBACK included). */
  readonly statementTimeoutMs: number;
}

/**
 * A connection from `acquire` within the acquire bound and the time left. One that comes after the request gave
 * up on it goes back to the pool unused.
 */
export async function checkOut<C extends PooledConnection>(
  acquire: () => Promise<C>,
  bounds: ConnectionBounds,
  deadline: Deadline,
): Promise<C> {
  let abandoned = false;
  return within(
    bounds.acquireTimeoutMs,
    'with a connection',
    () =>
      acquire().then((connection) => {
        if (abandoned) connection.release();
        return connection;
      }),
    deadline,
    () => {
      abandoned = true;
    },
  );
}

/**
 * A checked-out connection whose every call is bounded by its own bound and the request's deadline. A call that
 * runs out is given up on, and the connection with it: destroyed at once (its socket closed, its pool slot
 * freed), since its answer may still come and would be read as the next statement's.
 */
class Held {
  #broken = false;
  constructor(
    readonly connection: PooledConnection,
    readonly bounds: ConnectionBounds,
    readonly deadline: Deadline,
  ) {}

  get broken(): boolean {
    return this.#broken;
  }

  readonly bounded: Bounded = (what, call) => {
    if (this.#broken) return Promise.reject(new DatabaseTimeout(`${what}, on a connection given up on`, 0));
    return within(this.bounds.statementTimeoutMs, what, call, this.deadline, () => this.abandon());
  };

  abandon(): void {
    if (this.#broken) return;
    this.#broken = true;
    this.connection.destroy();
  }

  /** Done with it: back to the pool, unless it was given up on. */
  end(): void {
    if (!this.#broken) this.connection.release();
  }
}

/** `work` on a connection of its own, its statements bounded; then the connection goes back, or is destroyed. */
export async function onConnection<C extends PooledConnection, T>(
  acquire: () => Promise<C>,
  bounds: ConnectionBounds & { readonly serverTimeoutMs: number },
  deadline: Deadline,
  work: (connection: C) => Promise<T>,
  what = 'a statement',
): Promise<T> {
  const connection = (await checkOut(acquire, bounds, deadline)) as C;
  const held = new Held(connection, bounds, deadline);
  try {
    // One bound over the call: a store call may run a few statements (its retries after a deadlock).
    return await held.bounded(what, async () => {
      await connection.prepare(serverMsOf(bounds.serverTimeoutMs, deadline));
      return work(connection);
    });
  } finally {
    held.end();
  }
}

/** The database's own bound on the statements to come: its statement timeout, or the time left. */
const serverMsOf = (serverTimeoutMs: number, deadline: Deadline) =>
  Math.max(1, Math.floor(boundOf(serverTimeoutMs, deadline)));

/** A connection that broke while its COMMIT was on its way: whether the database got the COMMIT is unknown. */
function isConnectionLoss(error: unknown): boolean {
  for (
    let current = error, depth = 0;
    depth < 8 && typeof current === 'object' && current !== null;
    depth++
  ) {
    const { code, fatal, message } = current as { code?: unknown; fatal?: unknown; message?: unknown };
    if (fatal === true) return true; // mysql2: the connection is gone
    if (
      typeof code === 'string' &&
      ['ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'PROTOCOL_CONNECTION_LOST'].includes(code)
    )
      return true;
    if (
      typeof message === 'string' &&
      /^(Connection terminated|Client has encountered a connection error|Query read timeout)/.test(message)
    )
      return true;
    current = (current as { cause?: unknown }).cause;
  }
  return false;
}

/**
 * Run `body` in one transaction on a connection of its own, every wait within its own bound and the time left
 * before the request's deadline: getting the connection, BEGIN, each statement, COMMIT or ROLLBACK. The database
 * itself stops each statement once the time left at BEGIN has passed (`serverTimeoutMs` the most).
 *
 * - Past the deadline before COMMIT was sent (or a connection given up on): nothing committed, a DatabaseTimeout
 *   (a retryable 503); the connection is destroyed, and the database rolls the transaction back as it closes.
 * - A COMMIT that does not answer in time, or whose connection breaks on its way: CommitOutcomeUnknown.
 * - A ROLLBACK that does not answer in time: a DatabaseTimeout; one that fails leaves the body's own error.
 */
export async function transactionOn<T>(
  acquire: () => Promise<PooledConnection>,
  bounds: ConnectionBounds & { readonly serverTimeoutMs: number },
  deadline: Deadline,
  body: (tx: Executor) => Promise<T>,
): Promise<T> {
  const held = new Held(await checkOut(acquire, bounds, deadline), bounds, deadline);
  const { connection, bounded } = held;
  try {
    await bounded('the start of a transaction', () =>
      connection.begin(serverMsOf(bounds.serverTimeoutMs, deadline)),
    );
    let result: T;
    try {
      result = await body(boundedExecutor(connection.executor, bounded));
    } catch (error) {
      if (held.broken || boundOf(bounds.statementTimeoutMs, deadline) <= 0) held.abandon();
      else
        await bounded('the end of a transaction', () => connection.rollback()).catch((rollbackError) => {
          held.abandon();
          if (rollbackError instanceof DatabaseTimeout) throw rollbackError;
        });
      throw error;
    }
    const commitMs = boundOf(bounds.statementTimeoutMs, deadline);
    if (held.broken || commitMs <= 0) {
      held.abandon();
      throw new DatabaseTimeout('to commit', 0);
    }
    try {
      await bounded('the commit', () => connection.commit());
    } catch (error) {
      if (error instanceof DatabaseTimeout || isConnectionLoss(error)) {
        held.abandon();
        throw new CommitOutcomeUnknown(commitMs, { cause: error });
      }
      throw error;
    }
    return result;
  } finally {
    held.end();
  }
}
