import type { PurgeParams } from '@idem/core';
import { type SQL, sql } from 'drizzle-orm';
import { type BaseSQLiteDatabase, SQLiteSyncDialect } from 'drizzle-orm/sqlite-core';
import { bindShape, type CompiledShape, compileShape } from '../compiled.js';
import type { RawRow } from '../row.js';
import type { Shape } from '../statements.js';
import type { Dialect } from './dialect.js';
import { reserveInSteps, reserveShapes } from './reserve-steps.js';

// biome-ignore lint/suspicious/noExplicitAny: any synchronous SQLite Drizzle database (better-sqlite3).
export type SqliteDb = BaseSQLiteDatabase<'sync', any, any, any>;

interface PreparedStatement {
  all(...params: unknown[]): unknown[];
  run(...params: unknown[]): { changes: number };
}
interface Connection {
  prepare(source: string): PreparedStatement;
}

interface Compiled {
  readonly statement: PreparedStatement;
  readonly shape: CompiledShape;
}

const renderer = new SQLiteSyncDialect();
const compiledStatements = new WeakMap<Connection, Map<string, Compiled>>();

/** The better-sqlite3 connection behind a Drizzle database, or undefined (a transaction object, say). */
function connectionOf(db: SqliteDb): Connection | undefined {
  const client = (db as { $client?: Partial<Connection> & { inTransaction?: unknown } }).$client;
  return typeof client?.prepare === 'function' && typeof client.inTransaction === 'boolean'
    ? (client as Connection)
    : undefined;
}

/**
 * Drizzle renders and prepares raw SQL afresh on every call, and for the reserve upsert that costs more than
 * SQLite running it. A shaped statement is rendered with placeholders and prepared once per connection and
 * table, then only bound. Anything that is not a better-sqlite3 connection goes through Drizzle as usual.
 */
function compiled<V>(db: SqliteDb, table: string, shape: Shape<V>): Compiled | undefined {
  const connection = connectionOf(db);
  if (connection === undefined) return undefined;
  let cache = compiledStatements.get(connection);
  if (cache === undefined) {
    cache = new Map();
    compiledStatements.set(connection, cache);
  }
  const id = `${table}\u0000${shape.id}`;
  let entry = cache.get(id);
  if (entry === undefined) {
    const compiledShape = compileShape(renderer, shape, table);
    entry = { statement: connection.prepare(compiledShape.text), shape: compiledShape };
    cache.set(id, entry);
  }
  return entry;
}

const bind = (entry: Compiled, values: object): unknown[] => bindShape(entry.shape, values);

// better-sqlite3 runs each statement synchronously: nothing can interleave inside one, and SQLite's write
// lock serializes connections of other processes on the same file. These helpers are synchronous so that
// a caller's synchronous transaction can run them too.
export const sqliteSync = {
  rows: (db: SqliteDb, statement: SQL): RawRow[] => db.all<RawRow>(statement),
  affected: (db: SqliteDb, statement: SQL): number => db.run(statement).changes,
  shapeRows<V>(db: SqliteDb, table: string, shape: Shape<V>, values: V): RawRow[] {
    const entry = compiled(db, table, shape);
    if (entry === undefined) return db.all<RawRow>(shape.build(table, values));
    return entry.statement.all(...bind(entry, values as object)) as RawRow[];
  },
  shapeAffected<V>(db: SqliteDb, table: string, shape: Shape<V>, values: V): number {
    const entry = compiled(db, table, shape);
    if (entry === undefined) return db.run(shape.build(table, values)).changes;
    return entry.statement.run(...bind(entry, values as object)).changes;
  },
};

// SQLite (3.35+) has the same ON CONFLICT … DO NOTHING and UPDATE … RETURNING as PostgreSQL; it binds
// numbers, not booleans.
const shapes = reserveShapes((value) => (value ? 1 : 0));

export const sqlite: Dialect<SqliteDb> = {
  name: 'sqlite',
  async rows(db, statement) {
    return sqliteSync.rows(db, statement);
  },
  async affected(db, statement) {
    return sqliteSync.affected(db, statement);
  },
  async shapeRows(db, table, shape, values) {
    return sqliteSync.shapeRows(db, table, shape, values);
  },
  async shapeAffected(db, table, shape, values) {
    return sqliteSync.shapeAffected(db, table, shape, values);
  },
  // SQLite binds numbers, not booleans.
  bool: (value) => (value ? 1 : 0),
  reserve(db, table, params) {
    return reserveInSteps(this, shapes, db, table, params);
  },
  async purge(db, table, { beforeMs, limit }: PurgeParams) {
    return sqliteSync.affected(
      db,
      sql`DELETE FROM ${sql.identifier(table)} WHERE rowid IN (
        SELECT rowid FROM ${sql.identifier(table)} WHERE ${sql.identifier('expires_at_ms')} < ${beforeMs} LIMIT ${limit})`,
    );
  },
};
