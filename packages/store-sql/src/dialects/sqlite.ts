import type { PurgeParams } from '@idem/core';
import { type SQL, sql } from 'drizzle-orm';
import { type BaseSQLiteDatabase, SQLiteSyncDialect } from 'drizzle-orm/sqlite-core';
import type { RawRow } from '../row.js';
import type { Dialect } from './dialect.js';
import { outcomeOf, upsertReserve } from './postgres.js';

// biome-ignore lint/suspicious/noExplicitAny: any synchronous SQLite Drizzle database (better-sqlite3).
export type SqliteDb = BaseSQLiteDatabase<'sync', any, any, any>;

interface PreparedStatement {
  all(...params: unknown[]): unknown[];
  run(...params: unknown[]): { changes: number };
}
interface Connection {
  prepare(source: string): PreparedStatement;
}

const renderer = new SQLiteSyncDialect();
const MAX_CACHED = 64;
const cachedStatements = new WeakMap<Connection, Map<string, PreparedStatement>>();

/**
 * Drizzle prepares raw SQL afresh on every call, and parsing the reserve upsert costs SQLite more than running
 * it. The statements here differ only by table name, so they are prepared once per connection and kept.
 * Falls back to Drizzle for anything that is not a better-sqlite3 connection (a transaction object, say).
 */
function prepared(db: SqliteDb, statement: SQL): [PreparedStatement, unknown[]] | undefined {
  const client = (db as { $client?: Partial<Connection> & { inTransaction?: unknown } }).$client;
  if (typeof client?.prepare !== 'function' || typeof client.inTransaction !== 'boolean') return undefined;
  const connection = client as Connection;
  const query = renderer.sqlToQuery(statement);
  let cache = cachedStatements.get(connection);
  if (cache === undefined) {
    cache = new Map();
    cachedStatements.set(connection, cache);
  }
  let compiled = cache.get(query.sql);
  if (compiled === undefined) {
    if (cache.size >= MAX_CACHED) cache.clear();
    compiled = connection.prepare(query.sql);
    cache.set(query.sql, compiled);
  }
  return [compiled, query.params];
}

// better-sqlite3 runs each statement synchronously: nothing can interleave inside one, and SQLite's write
// lock serializes connections of other processes on the same file. These helpers are synchronous so that
// a caller's synchronous transaction can run them too.
export const sqliteSync = {
  rows(db: SqliteDb, statement: SQL): RawRow[] {
    const hit = prepared(db, statement);
    return hit === undefined ? db.all<RawRow>(statement) : (hit[0].all(...hit[1]) as RawRow[]);
  },
  affected(db: SqliteDb, statement: SQL): number {
    const hit = prepared(db, statement);
    return hit === undefined ? db.run(statement).changes : hit[0].run(...hit[1]).changes;
  },
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
    return outcomeOf(sqliteSync.rows(db, upsertReserve(table, params, this.bool))[0], params);
  },
  async purge(db, table, { beforeMs, limit }: PurgeParams) {
    return sqliteSync.affected(
      db,
      sql`DELETE FROM ${sql.identifier(table)} WHERE rowid IN (
        SELECT rowid FROM ${sql.identifier(table)} WHERE ${sql.identifier('expires_at_ms')} < ${beforeMs} LIMIT ${limit})`,
    );
  },
};
