import type { PurgeParams } from '@idem/core';
import { type SQL, sql } from 'drizzle-orm';
import type { BaseSQLiteDatabase } from 'drizzle-orm/sqlite-core';
import type { RawRow } from '../row.js';
import type { Dialect } from './dialect.js';
import { upsertReserve } from './postgres.js';

// biome-ignore lint/suspicious/noExplicitAny: any synchronous SQLite Drizzle database (better-sqlite3).
export type SqliteDb = BaseSQLiteDatabase<'sync', any, any, any>;

// better-sqlite3 runs each statement synchronously: nothing can interleave inside one, and SQLite's write
// lock serializes connections of other processes on the same file. These helpers are synchronous so that
// a caller's synchronous transaction can run them too.
export const sqliteSync = {
  rows: (db: SqliteDb, statement: SQL): RawRow[] => db.all<RawRow>(statement),
  affected: (db: SqliteDb, statement: SQL): number => db.run(statement).changes,
};

export const sqlite: Dialect<SqliteDb> = {
  name: 'sqlite',
  async rows(db, statement) {
    return sqliteSync.rows(db, statement);
  },
  async affected(db, statement) {
    return sqliteSync.affected(db, statement);
  },
  // SQLite binds numbers, not booleans.
  bool: (value) => (value ? 1 : 0),
  async reserve(db, table, params) {
    // SQLite (3.35+) has the same ON CONFLICT … DO UPDATE … WHERE … RETURNING as PostgreSQL.
    return sqliteSync.rows(db, upsertReserve(table, params, this.bool))[0];
  },
  async purge(db, table, { beforeMs, limit }: PurgeParams) {
    return sqliteSync.affected(
      db,
      sql`DELETE FROM ${sql.identifier(table)} WHERE rowid IN (
        SELECT rowid FROM ${sql.identifier(table)} WHERE ${sql.identifier('expires_at_ms')} < ${beforeMs} LIMIT ${limit})`,
    );
  },
};
