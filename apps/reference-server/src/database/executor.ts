import type { TransactionalStore } from '@idem/core';
import { type SupportedDb, sqlRows, sqlRun } from '@idem/store-sql';
import type { SQL } from 'drizzle-orm';

export type Row = Record<string, unknown>;

/** Runs statements: on the database, or inside a transaction. */
export interface Executor {
  /** `true` where `SELECT … FOR UPDATE` locks rows (PostgreSQL, MySQL); SQLite's transactions are exclusive. */
  readonly locksRows: boolean;
  rows(statement: SQL): Promise<Row[]>;
  /** Run a write; the number of rows it matched (the same on every database). */
  run(statement: SQL): Promise<number>;
  /** The idempotency store's calls in this executor's transaction (reserve, finalize, release). */
  readonly idempotency: TransactionalStore;
}

/** An executor on a Drizzle database or transaction, with store-sql's result handling for every driver. */
export function executorOn(db: SupportedDb, idempotency: TransactionalStore, locksRows: boolean): Executor {
  return {
    locksRows,
    rows: (statement) => sqlRows(db, statement),
    run: (statement) => sqlRun(db, statement),
    idempotency,
  };
}
