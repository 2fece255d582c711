import type { IdempotencyStore } from '@idem/core';
import type { Dialect } from './catalog-schema.js';
import type { Deadline } from './deadline.js';
import type { Executor } from './executor.js';
import type { ValueLimit } from './value-limit.js';

/** The catalog's database: its statements, its transactions, and the idempotency store on the same database. */
export interface CatalogDatabase extends Executor {
  readonly dialect: Dialect;
  readonly valueLimit: ValueLimit;
  /** The idempotency store over the same database. */
  readonly store: IdempotencyStore;
  /**
   * Run `body` in one transaction: commit when it resolves, roll back when it throws. Every wait of it (a
   * connection, each statement, the COMMIT) is bounded by its own setting and by the time left before
   * `deadline` (a request's: see database/deadline.ts).
   */
  transaction<T>(body: (tx: Executor) => Promise<T>, deadline?: Deadline): Promise<T>;
  /** Statements outside a transaction for a request that must be answered by `deadline`. */
  until(deadline: Deadline): Executor;
  ping(deadline?: Deadline): Promise<void>;
  close(): Promise<void>;
}
