import type { FinalizeParams } from '@idem/core';
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
  /** Finalize an idempotency record in this executor's transaction; false when the reservation was lost. */
  finalize(params: FinalizeParams): boolean | Promise<boolean>;
}

/** An executor on a Drizzle database or transaction, with store-sql's result handling for every driver. */
export function executorOn(db: SupportedDb, finalize: Executor['finalize'], locksRows: boolean): Executor {
  return {
    locksRows,
    rows: (statement) => sqlRows(db, statement),
    run: (statement) => sqlRun(db, statement),
    finalize,
  };
}
