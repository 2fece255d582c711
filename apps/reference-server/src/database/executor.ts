import type { TransactionalStore } from '@idem/core';
import { type SupportedDb, sqlRows, sqlRun } from '@idem/store-sql';
import { type SQL, sql } from 'drizzle-orm';
import type { Dialect } from './catalog-schema.js';

export type Row = Record<string, unknown>;

/**
 * How a read inside a transaction locks the rows it reads until the transaction ends: `share` keeps them from
 * being changed or deleted (others may share), `update` from being read locked by anyone else.
 */
export type LockMode = 'share' | 'update';

/** Runs statements: on the database, or inside a transaction. */
export interface Executor {
  /**
   * The clause a SELECT ends with to lock what it reads in `mode` (PostgreSQL `FOR SHARE` / `FOR UPDATE`,
   * MySQL `LOCK IN SHARE MODE` / `FOR UPDATE`); empty on SQLite, whose transactions hold the whole database.
   * On MySQL a locking read also reads the latest committed rows, not the transaction's snapshot.
   */
  lock(mode: LockMode): SQL;
  rows(statement: SQL): Promise<Row[]>;
  /** Run a write; the number of rows it matched (the same on every database). */
  run(statement: SQL): Promise<number>;
  /** The idempotency store's calls in this executor's transaction (reserve, finalize, release). */
  readonly idempotency: TransactionalStore;
}

const LOCKS: Record<Dialect, Record<LockMode, SQL>> = {
  postgres: { share: sql` FOR SHARE`, update: sql` FOR UPDATE` },
  // MariaDB knows FOR SHARE only from 10.6 (and MySQL from 8.0); LOCK IN SHARE MODE works on both.
  mysql: { share: sql` LOCK IN SHARE MODE`, update: sql` FOR UPDATE` },
  sqlite: { share: sql``, update: sql`` },
};

/** An executor on a Drizzle database or transaction, with store-sql's result handling for every driver. */
export function executorOn(db: SupportedDb, idempotency: TransactionalStore, dialect: Dialect): Executor {
  return {
    lock: (mode) => LOCKS[dialect][mode],
    rows: (statement) => sqlRows(db, statement),
    run: (statement) => sqlRun(db, statement),
    idempotency,
  };
}
