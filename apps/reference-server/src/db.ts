import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import type { IdempotencyStore } from '@idem/core';
import {
  createIfMissing,
  createSqlStore,
  ensureSchema,
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
import {
  DatabaseTimeout,
  type Deadline,
  NO_DEADLINE,
  onConnection,
  transactionOn,
  within,
} from './database/deadline.js';
import { type Executor, executorOn } from './database/executor.js';
import { type CatalogConnection, mysqlConnections, pgConnections } from './database/pool.js';
import { type Exclusive, exclusive, serialized } from './database/serialized.js';

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

/**
 * A CatalogDatabase over a pooled server database. Each call runs on a connection it checks out itself, every
 * wait within its own bound and the time left before the request's deadline; a connection whose call was given
 * up on is destroyed, never handed to the next request (see database/deadline.ts).
 */
async function pooled(
  dialect: 'postgres' | 'mysql',
  db: SupportedDb,
  acquire: () => Promise<CatalogConnection>,
  close: () => Promise<void>,
  bounds: Required<DatabaseOptions>,
): Promise<CatalogDatabase> {
  // Every call is bounded on the client too: a database that keeps its sockets open and stops answering
  // (a partition) never answers a server-side timeout. A margin past the server's own statement timeout, so
  // that a database that does answer reports its timeout first, on a connection that stays usable.
  const statementMs = bounds.statementTimeoutMs + CLIENT_MARGIN_MS;
  const connections = {
    acquireTimeoutMs: bounds.acquireTimeoutMs,
    statementTimeoutMs: statementMs,
    serverTimeoutMs: bounds.statementTimeoutMs,
  };
  const on = <T>(deadline: Deadline, what: string, work: (connection: CatalogConnection) => Promise<T>) =>
    onConnection(acquire, connections, deadline, work, what);
  const { lock } = executorOn(db, undefined as never, dialect);
  const store: IdempotencyStore = {
    reserve: (params) => on(NO_DEADLINE, "the idempotency store's reserve", (c) => c.store.reserve(params)),
    load: (params) => on(NO_DEADLINE, "the idempotency store's load", (c) => c.store.load(params)),
    finalize: (params) =>
      on(NO_DEADLINE, "the idempotency store's finalize", (c) => c.store.finalize(params)),
    release: (params) => on(NO_DEADLINE, "the idempotency store's release", (c) => c.store.release(params)),
    renewLease: (params) =>
      on(NO_DEADLINE, "the idempotency store's renewLease", (c) => c.store.renewLease(params)),
    purgeExpired: (params) =>
      on(NO_DEADLINE, "the idempotency store's purgeExpired", (c) => c.store.purgeExpired(params)),
  };
  const until = (deadline: Deadline): Executor => ({
    lock,
    rows: (statement) => on(deadline, 'a statement', (c) => c.executor.rows(statement)),
    run: (statement) => on(deadline, 'a statement', (c) => c.executor.run(statement)),
    // Outside a transaction, each call is a statement of its own.
    idempotency: {
      reserve: (params) => on(deadline, 'a statement', (c) => c.executor.idempotency.reserve(params)),
      finalize: (params) => on(deadline, 'a statement', async (c) => c.executor.idempotency.finalize(params)),
      release: (params) => on(deadline, 'a statement', async (c) => c.executor.idempotency.release(params)),
    },
  });
  const direct = until(NO_DEADLINE);
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
      until,
      transaction: (body, deadline = NO_DEADLINE) => transactionOn(acquire, connections, deadline, body),
      ping: async (deadline = NO_DEADLINE) => void (await until(deadline).rows(sql`SELECT 1`)),
      close,
    };
  } catch (error) {
    // Not reachable (yet): the caller tries again with a new pool, so this one must not stay open.
    await close().catch(() => {});
    throw error;
  }
}

/** Throws a DatabaseTimeout once `deadline` has passed: SQLite's statements cannot be stopped once they run. */
function due(deadline: Deadline, what: string): void {
  if (performance.now() >= deadline) throw new DatabaseTimeout(what, 0);
}

/**
 * `task` in its turn on SQLite's one connection, unless `deadline` passes while it waits for it. Once its turn
 * has come, it runs to its end: a task is never given up on half-way (it may be committing).
 */
function inTurn<T>(turn: Exclusive, deadline: Deadline, task: () => Promise<T>): Promise<T> {
  const leftMs = deadline - performance.now();
  if (leftMs === Number.POSITIVE_INFINITY) return turn(task);
  if (leftMs <= 0) return Promise.reject(new DatabaseTimeout('with its turn on the connection', 0));
  return new Promise<T>((resolve, reject) => {
    let state: 'waiting' | 'running' | 'abandoned' = 'waiting';
    const timer = setTimeout(() => {
      if (state !== 'waiting') return;
      state = 'abandoned';
      reject(new DatabaseTimeout('with its turn on the connection', leftMs));
    }, Math.ceil(leftMs));
    turn(async () => {
      if (state === 'abandoned') return undefined;
      state = 'running';
      clearTimeout(timer);
      return task();
    }).then(
      (value) => {
        if (state === 'running') resolve(value as T);
      },
      (error: unknown) => {
        if (state === 'running') reject(error);
      },
    );
  });
}

/** An executor on SQLite that runs no statement once `deadline` has passed. */
function checkedAt(executor: Executor, deadline: Deadline): Executor {
  if (deadline === NO_DEADLINE) return executor;
  const { idempotency } = executor;
  return {
    lock: executor.lock,
    rows: async (statement) => {
      due(deadline, 'a statement');
      return executor.rows(statement);
    },
    run: async (statement) => {
      due(deadline, 'a statement');
      return executor.run(statement);
    },
    idempotency: {
      reserve: async (params) => {
        due(deadline, "the idempotency store's reserve");
        return idempotency.reserve(params);
      },
      finalize: async (params) => {
        due(deadline, "the idempotency store's finalize");
        return idempotency.finalize(params);
      },
      release: async (params) => {
        due(deadline, "the idempotency store's release");
        return idempotency.release(params);
      },
    },
  };
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
    // Statements are synchronous here (better-sqlite3): none can be stopped once it runs. A deadline bounds the
    // wait for the connection's turn, and is checked before each statement and before COMMIT: past it, the
    // transaction rolls back (synchronously, so nothing is left unknown) and the answer is a retryable 503.
    until: (deadline) => {
      const checked = checkedAt(direct, deadline);
      return {
        lock: direct.lock,
        rows: (statement) => inTurn(turn, deadline, () => checked.rows(statement)),
        run: (statement) => inTurn(turn, deadline, () => checked.run(statement)),
        idempotency: serialized(checked.idempotency, <T>(task: () => Promise<T>) =>
          inTurn(turn, deadline, task),
        ),
      };
    },
    transaction: (body, deadline = NO_DEADLINE) =>
      inTurn(turn, deadline, async () => {
        connection.exec('BEGIN IMMEDIATE');
        try {
          const result = await body(checkedAt(direct, deadline));
          due(deadline, 'to commit');
          connection.exec('COMMIT');
          return result;
        } catch (error) {
          connection.exec('ROLLBACK');
          throw error;
        }
      }),
    ping: (deadline = NO_DEADLINE) =>
      inTurn(turn, deadline, async () => void (await direct.rows(sql`SELECT 1`))),
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
  /** The most connections open to a PostgreSQL or MySQL database. @default 10 */
  readonly poolSize?: number;
}

/** The database options of a server's settings. */
export const databaseOptions = (config: ServerConfig): DatabaseOptions => ({
  lockTimeoutMs: config.idempotency.maxWaitMs,
  statementTimeoutMs: config.database.statementTimeoutMs,
  acquireTimeoutMs: config.database.acquireTimeoutMs,
  idleTransactionTimeoutMs: config.database.idleTransactionTimeoutMs,
  poolSize: config.database.poolSize,
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
    poolSize: options.poolSize ?? 10,
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
      max: bounds.poolSize,
      options: settings.map((setting) => `-c ${setting}`).join(' '),
      connectionTimeoutMillis: bounds.acquireTimeoutMs,
      // Only a backstop (the startup's statements): every request's statement is bounded sooner, and its
      // connection destroyed when it runs out (database/deadline.ts).
      query_timeout: bounds.statementTimeoutMs + 2 * CLIENT_MARGIN_MS,
      keepAlive: true,
    });
    // node-postgres emits 'error' on a client whose connection breaks (reset, or ended by the server), and an
    // 'error' event nobody listens to ends the process. The pool listens on its idle clients only; a client
    // checked out (in a transaction) needs its own listener. The query in flight fails with the error itself
    // (a 503), and the pool drops the client when it comes back.
    pool.on('error', ignore);
    pool.on('connect', (client) => client.on('error', ignore));
    const db = pgDrizzle(pool);
    return pooled('postgres', db, pgConnections(pool, bounds.statementTimeoutMs), () => pool.end(), bounds);
  }
  if (url.startsWith('mysql://')) {
    const pool = mysql.createPool({
      uri: url,
      connectionLimit: bounds.poolSize,
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
    return pooled('mysql', db, mysqlConnections(pool, bounds.statementTimeoutMs), () => pool.end(), bounds);
  }
  return openSqlite(url.replace(/^(sqlite|file):/, ''));
}
