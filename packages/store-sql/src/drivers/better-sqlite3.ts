import type { SQL } from 'drizzle-orm';
import { SQLiteSyncDialect } from 'drizzle-orm/sqlite-core';
import type { RawRow } from '../row.js';
import { bind, type CompiledShape, compile, type Shape } from '../statement-cache.js';
import type { Driver, StatementResult } from './driver.js';

interface PreparedStatement {
  readonly reader: boolean;
  all(...params: unknown[]): unknown[];
  run(...params: unknown[]): { changes: number };
}
/** A better-sqlite3 Database, as Drizzle keeps it on `$client`. */
interface Connection {
  prepare(source: string): PreparedStatement;
}
/** A Drizzle SQLite database or transaction: `all` for rows, `run` for writes. */
interface SqliteRunner {
  all<T>(statement: SQL): T[];
  run(statement: SQL): { changes: number };
}

// Prepared once per connection and text; the connection's own statement objects.
const prepared = new WeakMap<Connection, Map<CompiledShape, PreparedStatement>>();

function statementOn(connection: Connection, compiled: CompiledShape): PreparedStatement {
  let statements = prepared.get(connection);
  if (statements === undefined) {
    statements = new Map();
    prepared.set(connection, statements);
  }
  let statement = statements.get(compiled);
  if (statement === undefined) {
    statement = connection.prepare(compiled.text);
    statements.set(compiled, statement);
  }
  return statement;
}

const renderer = new SQLiteSyncDialect();
/** Statements of any text, prepared once per connection: a host's own queries repeat too. Bounded. */
const byText = new WeakMap<Connection, Map<string, PreparedStatement>>();
const MAX_CACHED_TEXTS = 500;

function preparedText(connection: Connection, text: string): PreparedStatement {
  let statements = byText.get(connection);
  if (statements === undefined) {
    statements = new Map();
    byText.set(connection, statements);
  }
  let statement = statements.get(text);
  if (statement === undefined) {
    if (statements.size >= MAX_CACHED_TEXTS) statements.clear();
    statement = connection.prepare(text);
    statements.set(text, statement);
  }
  return statement;
}

function executeSync(db: unknown, statement: SQL, returnsRows: boolean): StatementResult {
  const connection = (db as { $client?: Connection }).$client;
  if (connection !== undefined) {
    // Drizzle would render and prepare the text again on every call; on the connection, once is enough.
    const query = renderer.sqlToQuery(statement);
    const prepared = preparedText(connection, query.sql);
    if (returnsRows && prepared.reader) {
      const rows = prepared.all(...query.params) as RawRow[];
      return { rows, affected: rows.length };
    }
    return { rows: [], affected: prepared.run(...query.params).changes };
  }
  const runner = db as SqliteRunner;
  if (returnsRows) {
    const rows = runner.all<RawRow>(statement);
    return { rows, affected: rows.length };
  }
  return { rows: [], affected: runner.run(statement).changes };
}

// Drizzle renders and prepares raw SQL afresh on every call, and for the reserve statements that costs more
// than SQLite running them: on the connection itself a shaped statement is prepared once, then only bound.
function runSync<V>(db: unknown, table: string, shape: Shape<V>, values: V): StatementResult {
  const compiled = compile('sqlite', shape as Shape<unknown>, table);
  const connection = (db as { $client?: Connection }).$client;
  if (connection === undefined) {
    return executeSync(db, shape.build(table, values), /^\s*SELECT|\bRETURNING\b/i.test(compiled.text));
  }
  const statement = statementOn(connection, compiled);
  const params = bind(compiled, values as object);
  if (statement.reader) {
    const rows = statement.all(...params) as RawRow[];
    return { rows, affected: rows.length };
  }
  return { rows: [], affected: statement.run(...params).changes };
}

/**
 * better-sqlite3 (`drizzle-orm/better-sqlite3`). Every statement runs synchronously, so that a caller's
 * synchronous Drizzle transaction can finalize inside it; nothing can interleave inside one statement, and
 * SQLite's write lock serializes the connections of other processes on the same file.
 */
export const betterSqlite3: Driver & { runSync: typeof runSync } = {
  name: 'better-sqlite3',
  dialect: 'sqlite',
  session: 'BetterSQLiteSession',
  async run(db, table, shape, values) {
    return runSync(db, table, shape, values);
  },
  async execute(db, statement, reads = false) {
    // Drizzle's SQLite databases split reads (`all`) from writes (`run`).
    return executeSync(db, statement, reads);
  },
  runSync,
};
