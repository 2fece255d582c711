import { sql } from 'drizzle-orm';
import type { BaseSQLiteDatabase } from 'drizzle-orm/sqlite-core';
import type { Dialect } from './dialect.js';
import { afterByRowValue, reserveInSteps, reserveShapes } from './on-conflict.js';

// biome-ignore lint/suspicious/noExplicitAny: any synchronous SQLite Drizzle database or transaction (better-sqlite3).
export type SqliteDb = BaseSQLiteDatabase<'sync', any, any, any>;

// SQLite (3.35+) has the same ON CONFLICT … DO NOTHING and UPDATE … RETURNING as PostgreSQL; it binds
// numbers, not booleans.
const shapes = reserveShapes((value) => (value ? 1 : 0));

export const sqlite: Dialect = {
  name: 'sqlite',
  bool: (value) => (value ? 1 : 0),
  reserve: (driver, db, table, params) => reserveInSteps(driver, shapes, db, table, params),
  // length() of a BLOB counts bytes (of TEXT, characters: bodies are always bound as BLOBs), and SQLite answers
  // it from the record header without loading the blob's overflow pages.
  byteLength: (column) => sql`length(${column})`,
  after: afterByRowValue,
  purge: async (driver, db, table, { beforeMs, limit }) =>
    (
      await driver.execute(
        db,
        sql`DELETE FROM ${sql.identifier(table)} WHERE rowid IN (
      SELECT rowid FROM ${sql.identifier(table)} WHERE ${sql.identifier('expires_at_ms')} < ${beforeMs} LIMIT ${limit})`,
      )
    ).affected,
};
