import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import type { IdempotencyStore } from '@idem/core';
import {
  createIfMissing,
  createSqlStore,
  ensureSchema,
  type SqlStore,
  type SupportedDb,
  sqlRows,
  sqlRun,
} from '@idem/store-sql';
import Database from 'better-sqlite3';
import { sql } from 'drizzle-orm';
import { drizzle as sqliteDrizzle } from 'drizzle-orm/better-sqlite3';
import { drizzle as mysqlDrizzle } from 'drizzle-orm/mysql2';
import { drizzle as pgDrizzle } from 'drizzle-orm/node-postgres';
import mysql from 'mysql2/promise';
import pg from 'pg';
import type { ServerConfig } from './config.js';
import { addedColumns, catalogDdl, type Dialect } from './database/catalog-schema.js';
import { boundedExecutor, boundedStore, boundedTransaction, within } from './database/deadline.js';
import { type Executor, executorOn } from './database/executor.js';
import { exclusive, serialized } from './database/serialized.js';

export type { Executor, LockMode, Row } from './database/executor.js';

/**
 * The largest text value (a table's metadata) one statement carries to the database, and how the driver counts
 * a text's bytes on the way: a value past it is the caller's error, refused before anything is written.
 */
export interface ValueLimit {
  readonly maxBytes: number;
  bytesOf(text: string): number;
}

/** The catalog's database: its statements, its transactions, and the idempotency store on the same database. */
export interface CatalogDatabase extends Executor {
  readonly dialect: Dialect;
  readonly valueLimit: ValueLimit;
  /** The idempotency store over the same database. */
  readonly store: IdempotencyStore;
  /** Run `body` in one transaction: commit when it resolves, roll back when it throws. */
  transaction<T>(body: (tx: Executor) => Promise<T>): Promise<T>;
  ping(): Promise<void>;
  close(): Promise<void>;
}

/** A Drizzle database whose transactions the driver runs (PostgreSQL, MySQL pools). */
interface PooledDb<Tx extends SupportedDb> {
  transaction<T>(body: (tx: Tx) => Promise<T>): Promise<T>;
}

/**
 * Create the catalog's tables, and add the columns a database made by an older server lacks. Safe from many
 * nodes at once: a column another node added first is there when looked at again.
 */
async function catalogSchema(db: SupportedDb, dialect: Dialect): Promise<void> {
  await createIfMissing(db, catalogDdl(dialect));
  const has = (table: string, column: string) =>
    sqlRows(db, sql`SELECT ${sql.identifier(column)} FROM ${sql.identifier(table)} WHERE 1 = 0`).then(
      () => true,
      () => false,
    );
  for (const [table, column, type] of addedColumns(dialect)) {
    if (await has(table, column)) continue;
    try {
      await sqlRun(db, sql.raw(`ALTER TABLE ${table} ADD COLUMN ${column} ${type}`));
    } catch (error) {
      if (!(await has(table, column))) throw error;
    }
  }
}

const utf8Bytes = (text: string) => Buffer.byteLength(text, 'utf8');

// A text column holds up to 1 GB on PostgreSQL, and SQLite's default SQLITE_MAX_LENGTH is 10^9 bytes.
const LARGE_VALUES: ValueLimit = { maxBytes: 1_000_000_000 - 1024 * 1024, bytesOf: utf8Bytes };

// Room in a MySQL packet for the rest of the statement: its SQL, names and locations (a location's text is at
// most MAX_LOCATION_TEXT_BYTES).
const PACKET_MARGIN_BYTES = 64 * 1024;
// What mysql2 escapes when it puts a string into a statement (sqlstring: NUL, \b, \t, \n, \r, ^Z, quotes and
// backslash): each takes two bytes.
const MYSQL_ESCAPED = new Set([0x00, 0x08, 0x09, 0x0a, 0x0d, 0x1a, 0x22, 0x27, 0x5c]);

/** The bytes `text` takes in a statement mysql2 formats. Counted, not matched: a match array of 8M quotes. */
function mysqlBytes(text: string): number {
  let escaped = 0;
  for (let i = 0; i < text.length; i++) if (MYSQL_ESCAPED.has(text.charCodeAt(i))) escaped++;
  return utf8Bytes(text) + escaped;
}

/**
 * MySQL refuses a statement larger than `max_allowed_packet` (ER_NET_PACKET_TOO_LARGE, and drops the
 * connection): read it once, and count a value as mysql2 sends it, escapes included (JSON is full of quotes).
 */
async function mysqlValueLimit(db: SupportedDb): Promise<ValueLimit> {
  const [row] = await sqlRows(db, sql`SELECT @@max_allowed_packet AS packet`);
  const packet = Number(row?.packet);
  if (!Number.isSafeInteger(packet) || packet <= PACKET_MARGIN_BYTES)
    throw new Error(`unexpected max_allowed_packet ${String(row?.packet)} from the server`);
  return {
    maxBytes: packet - PACKET_MARGIN_BYTES,
    bytesOf: mysqlBytes,
  };
}

/** A CatalogDatabase over a pooled server database: each transaction on one of the pool's connections. */
async function pooled<Tx extends SupportedDb>(
  dialect: 'postgres' | 'mysql',
  db: SupportedDb & PooledDb<Tx>,
  sqlStore: SqlStore<Tx, Promise<boolean>>,
  close: () => Promise<void>,
  bounds: Required<DatabaseOptions>,
): Promise<CatalogDatabase> {
  // Every call is bounded on the client too: a database that keeps its sockets open and stops answering
  // (a partition) never answers a server-side timeout. A margin past the server's own statement timeout, so
  // that a database that does answer reports its timeout first, on a connection that stays usable.
  const statementMs = bounds.statementTimeoutMs + CLIENT_MARGIN_MS;
  const store = boundedStore(sqlStore, statementMs);
  const direct = boundedExecutor(executorOn(db, store, dialect), statementMs);
  try {
    await within(statementMs, 'the schema', async () => {
      await ensureSchema(db, { dialect });
      await catalogSchema(db, dialect);
    });
    const valueLimit =
      dialect === 'mysql'
        ? await within(statementMs, 'a statement', () => mysqlValueLimit(db))
        : LARGE_VALUES;
    return {
      dialect,
      valueLimit,
      store,
      ...direct,
      transaction: (body) =>
        boundedTransaction(
          (inner) =>
            db.transaction((tx) =>
              inner(boundedExecutor(executorOn(tx, sqlStore.inTransaction(tx), dialect), statementMs)),
            ),
          body,
          { acquireTimeoutMs: bounds.acquireTimeoutMs, endTimeoutMs: statementMs },
        ),
      ping: async () => void (await direct.rows(sql`SELECT 1`)),
      close,
    };
  } catch (error) {
    // Not reachable (yet): the caller tries again with a new pool, so this one must not stay open.
    await close().catch(() => {});
    throw error;
  }
}

async function openSqlite(file: string): Promise<CatalogDatabase> {
  if (file !== ':memory:') mkdirSync(dirname(file), { recursive: true });
  const connection = new Database(file, { timeout: 10_000 });
  connection.pragma('journal_mode = WAL');
  const db = sqliteDrizzle(connection);
  await ensureSchema(db, { dialect: 'sqlite' });
  await catalogSchema(db, 'sqlite');
  const store = createSqlStore(db, { dialect: 'sqlite' });
  // One connection for the whole process: every statement and every transaction takes its turn, so that a
  // transaction's statements never interleave with another request's. Inside `transaction` the connection
  // itself is in the transaction (BEGIN IMMEDIATE), so the synchronous transactional finalize runs on it.
  const turn = exclusive();
  const direct = executorOn(db, store.inTransaction(db), 'sqlite');
  return {
    dialect: 'sqlite',
    valueLimit: LARGE_VALUES,
    lock: direct.lock,
    // The coordinator's own store calls take their turn too, or they could land inside an open transaction.
    store: serialized(store, turn),
    rows: (statement) => turn(() => direct.rows(statement)),
    run: (statement) => turn(() => direct.run(statement)),
    idempotency: serialized(direct.idempotency, turn),
    transaction: (body) =>
      turn(async () => {
        connection.exec('BEGIN IMMEDIATE');
        try {
          const result = await body(direct);
          connection.exec('COMMIT');
          return result;
        } catch (error) {
          connection.exec('ROLLBACK');
          throw error;
        }
      }),
    ping: () => turn(async () => void (await direct.rows(sql`SELECT 1`))),
    close: async () => void connection.close(),
  };
}

/** How long the database's calls may take; every one is bounded (see the README's settings table). */
export interface DatabaseOptions {
  /**
   * The longest a statement waits for a row lock, in ms: a request that waits behind another with its key
   * (on the idempotency record's row) answers a retryable 503 after this. @default 5_000
   */
  readonly lockTimeoutMs?: number;
  /** The longest one statement runs, in ms (server side, and client side a little later). @default 10_000 */
  readonly statementTimeoutMs?: number;
  /** The longest a transaction waits for a connection, opening one included, in ms. @default 5_000 */
  readonly acquireTimeoutMs?: number;
  /**
   * How long the database keeps an open transaction whose client has gone silent before it ends the session,
   * in ms (PostgreSQL `idle_in_transaction_session_timeout`, MariaDB `idle_transaction_timeout`, whole seconds):
   * a stalled node's reservation and row locks last that long. @default 10_000
   */
  readonly idleTransactionTimeoutMs?: number;
}

/** The database options of a server's settings. */
export const databaseOptions = (config: ServerConfig): DatabaseOptions => ({
  lockTimeoutMs: config.idempotency.maxWaitMs,
  statementTimeoutMs: config.database.statementTimeoutMs,
  acquireTimeoutMs: config.database.acquireTimeoutMs,
  idleTransactionTimeoutMs: config.database.idleTransactionTimeoutMs,
});

// How much later than the database's statement timeout the client gives up on a statement.
const CLIENT_MARGIN_MS = 1_000;

const ignore = () => {};
const wholeSeconds = (ms: number) => Math.max(1, Math.ceil(ms / 1_000));

/** Open the catalog on `sqlite:<file>` (or `sqlite::memory:`), `postgres://…` or `mysql://…`. */
export async function openDatabase(url: string, options: DatabaseOptions = {}): Promise<CatalogDatabase> {
  const bounds: Required<DatabaseOptions> = {
    lockTimeoutMs: options.lockTimeoutMs ?? 5_000,
    statementTimeoutMs: options.statementTimeoutMs ?? 10_000,
    acquireTimeoutMs: options.acquireTimeoutMs ?? 5_000,
    idleTransactionTimeoutMs: options.idleTransactionTimeoutMs ?? 10_000,
  };
  if (url.startsWith('postgres://') || url.startsWith('postgresql://')) {
    // Set once per connection, as startup parameters: no statement per transaction.
    const settings = [
      `lock_timeout=${bounds.lockTimeoutMs}`,
      `statement_timeout=${bounds.statementTimeoutMs}`,
      `idle_in_transaction_session_timeout=${bounds.idleTransactionTimeoutMs}`,
    ];
    const pool = new pg.Pool({
      connectionString: url,
      max: 10,
      options: settings.map((setting) => `-c ${setting}`).join(' '),
      connectionTimeoutMillis: bounds.acquireTimeoutMs,
      query_timeout: bounds.statementTimeoutMs + CLIENT_MARGIN_MS,
      keepAlive: true,
    });
    // node-postgres emits 'error' on a client whose connection breaks (reset, or ended by the server), and an
    // 'error' event nobody listens to ends the process. The pool listens on its idle clients only; a client
    // checked out (in a transaction) needs its own listener. The query in flight fails with the error itself
    // (a 503), and the pool drops the client when it comes back.
    pool.on('error', ignore);
    pool.on('connect', (client) => client.on('error', ignore));
    const db = pgDrizzle(pool);
    return pooled('postgres', db, createSqlStore(db, { dialect: 'postgres' }), () => pool.end(), bounds);
  }
  if (url.startsWith('mysql://')) {
    const pool = mysql.createPool({
      uri: url,
      connectionLimit: 10,
      connectTimeout: bounds.acquireTimeoutMs,
      enableKeepAlive: true,
    });
    // Set on each connection as the pool opens it, before its first statement. InnoDB counts lock waits in
    // whole seconds; max_statement_time and idle_transaction_timeout are MariaDB's (MySQL refuses them: the
    // client-side bounds still hold there).
    pool.pool.on('connection', (connection) => {
      connection.on('error', ignore); // a connection that breaks while idle: the pool drops it
      connection.query(
        `SET SESSION innodb_lock_wait_timeout = ${wholeSeconds(bounds.lockTimeoutMs)}`,
        ignore,
      );
      connection.query(`SET SESSION max_statement_time = ${bounds.statementTimeoutMs / 1_000}`, ignore);
      connection.query(
        `SET SESSION idle_transaction_timeout = ${wholeSeconds(bounds.idleTransactionTimeoutMs)}`,
        ignore,
      );
    });
    const db = mysqlDrizzle(pool);
    return pooled('mysql', db, createSqlStore(db, { dialect: 'mysql' }), () => pool.end(), bounds);
  }
  return openSqlite(url.replace(/^(sqlite|file):/, ''));
}
