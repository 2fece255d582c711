import {
  checkListParams,
  checkStatsParams,
  decodeRecordCursor,
  encodeRecordCursor,
  type FinalizeParams,
  IdemInProgressError,
  type IdempotencyRecord,
  type IdempotencyStore,
  type ListParams,
  newReservation,
  type RecordPage,
  type RecordRef,
  type ReserveParams,
  type ReserveResult,
  type StatsParams,
  type StoreStats,
  type TransactionalStore,
} from '@idem/core';
import type { DialectName } from './dialect-name.js';
import type { Dialect } from './dialects/dialect.js';
import { type MysqlDb, mysql } from './dialects/mysql.js';
import { type PostgresDb, postgres } from './dialects/postgres.js';
import { type SqliteDb, sqlite } from './dialects/sqlite.js';
import type { Driver } from './drivers/driver.js';
import { driverOf } from './drivers/index.js';
import { checkCursorRef, listStatement, statsInScopeShape, statsShape, toStats } from './inspection.js';
import { checkRef, checkReserve, checkResponse } from './limits.js';
import { toBuffer, toListedRecord, toRecord } from './row.js';
import {
  type FinalizeValues,
  finalizeShape,
  forgetShape,
  loadShape,
  releaseShape,
  renewShape,
} from './statements.js';
import { checkTableName, DEFAULT_TABLE } from './table-name.js';

export interface SqlStoreOptions {
  /** The table of records. @default 'idem_records' */
  readonly table?: string;
  /** Bodies larger than this are refused with an error rather than sent to the database. @default 8 MiB */
  readonly maxBodyBytes?: number;
}

export interface PostgresStoreOptions extends SqlStoreOptions {
  readonly dialect: 'postgres';
}
export interface MysqlStoreOptions extends SqlStoreOptions {
  readonly dialect: 'mysql';
}
export interface SqliteStoreOptions extends SqlStoreOptions {
  readonly dialect: 'sqlite';
}

/**
 * The store's calls inside one transaction of the caller's, whose `finalize` answers as `Done`: a `boolean`
 * for SQLite, so that it runs inside better-sqlite3's synchronous transactions.
 */
export interface SqlTransactionalStore<Done extends Promise<boolean> | boolean> extends TransactionalStore {
  /**
   * Owner-fenced like the store's `finalize`: when it answers `false` the reservation was lost and the caller
   * MUST roll back, or the work could be committed twice.
   */
  finalize(params: FinalizeParams): Done;
}

/**
 * An {@link IdempotencyStore} over a SQL database, plus its calls inside the caller's transaction.
 *
 * `Tx` is the dialect's Drizzle transaction; `Done` is `Promise<boolean>`, or `boolean` for SQLite, whose
 * better-sqlite3 transactions are synchronous.
 */
export interface SqlStore<Tx, Done extends Promise<boolean> | boolean> extends IdempotencyStore {
  /**
   * The store's calls inside the caller's transaction: a key reserved, finalized or released there commits or
   * rolls back with the caller's writes. With a coordinator: `execution.finalizeWith(response,
   * store.inTransaction(tx))` after the work; with `reserveIn: 'transaction'`, first
   * `execution.reserveWith(store.inTransaction(tx))`. Concurrent duplicates wait on the row (PostgreSQL,
   * MySQL) until this transaction ends.
   */
  inTransaction(tx: Tx): SqlTransactionalStore<Done>;
  /** Delete the record of (scope, key), in flight or completed, whoever owns it; `true` when there was one. */
  forget(params: RecordRef): Promise<boolean>;
  /**
   * A page of records in (scope, key) order, as the database sorts the two columns (bytes on MySQL and SQLite,
   * the columns' collation on PostgreSQL): one indexed range read of the primary key after the cursor, which
   * is the last (scope, key) listed. Records added or removed between pages never make paging skip or repeat
   * one that stays. Bodies are read only with `bodies`; otherwise only their size.
   */
  list(params: ListParams): Promise<RecordPage>;
  /** Counts by state at `nowMs`, in one aggregate statement (a scan of the table, or of the scope's rows). */
  stats(params: StatsParams): Promise<StoreStats>;
}

type TxOf<Db> = Db extends { transaction(fn: (tx: infer T) => infer _R): unknown } ? T : never;

const DIALECTS: Record<DialectName, Dialect> = { postgres, mysql, sqlite };

// A deadlock or a lock wait that timed out rolls back only the statement's own (autocommit) transaction: the
// call is tried again, a few times with a random pause. Never inside a caller's transaction, which the
// database has aborted as a whole.
const TRANSIENT = new Set(['ER_LOCK_DEADLOCK', 'ER_LOCK_WAIT_TIMEOUT', '40P01', '40001']);
const TRANSIENT_ATTEMPTS = 4;
// The database gave up waiting for a row lock (PostgreSQL's lock_timeout, InnoDB's innodb_lock_wait_timeout).
const LOCK_WAIT_TIMEOUT = new Set(['ER_LOCK_WAIT_TIMEOUT', '55P03']);

/** Whether `error`, or an error it wraps (Drizzle keeps the driver's as `cause`), has one of `codes`. */
function hasCode(error: unknown, codes: ReadonlySet<string>): boolean {
  for (let e: unknown = error; typeof e === 'object' && e !== null; e = (e as { cause?: unknown }).cause) {
    if (codes.has(String((e as { code?: unknown }).code))) return true;
  }
  return false;
}

const isTransient = (error: unknown): boolean => hasCode(error, TRANSIENT);

async function transient<T>(call: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await call();
    } catch (error) {
      if (attempt === TRANSIENT_ATTEMPTS || !isTransient(error)) throw error;
      await new Promise((resolve) => setTimeout(resolve, Math.random() * 10 * 2 ** attempt));
    }
  }
}

const DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024;
const RESERVE_ATTEMPTS = 5;

/**
 * Create a store over the user's own Drizzle database: node-postgres, PGlite or postgres-js for PostgreSQL,
 * mysql2 for MySQL / MariaDB, better-sqlite3 for SQLite (any other driver is refused with a TypeError). The
 * store never opens or closes the connection; create the table first with {@link ensureSchema} or the
 * shipped drizzle-kit migrations.
 *
 * @example
 * const db = drizzle(new pg.Pool({ connectionString }));
 * await ensureSchema(db, { dialect: 'postgres' });
 * const store = createSqlStore(db, { dialect: 'postgres' });
 */
export function createSqlStore<Db extends PostgresDb>(
  db: Db,
  options: PostgresStoreOptions,
): SqlStore<TxOf<Db>, Promise<boolean>>;
export function createSqlStore<Db extends MysqlDb>(
  db: Db,
  options: MysqlStoreOptions,
): SqlStore<TxOf<Db>, Promise<boolean>>;
// A SQLite transaction may be Drizzle's (synchronous) or one the host opened itself on the connection
// (`BEGIN IMMEDIATE` for async work): either way, any synchronous SQLite database runs the finalize.
export function createSqlStore<Db extends SqliteDb>(
  db: Db,
  options: SqliteStoreOptions,
): SqlStore<SqliteDb, boolean>;
export function createSqlStore(
  db: PostgresDb | MysqlDb | SqliteDb,
  options: PostgresStoreOptions | MysqlStoreOptions | SqliteStoreOptions,
): SqlStore<unknown, Promise<boolean> | boolean> {
  const table = checkTableName(options.table ?? DEFAULT_TABLE);
  const maxBodyBytes = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
  const dialect = DIALECTS[options.dialect];
  if (dialect === undefined) throw new TypeError(`unknown dialect ${JSON.stringify(options.dialect)}`);
  const driver = driverOf(db);
  if (driver.dialect !== dialect.name) {
    throw new TypeError(
      `dialect '${dialect.name}' was given a ${driver.name} database, which speaks ${driver.dialect}`,
    );
  }
  return build(driver, dialect, db, table, maxBodyBytes);
}

function finalizeValues(dialect: Dialect, params: FinalizeParams, headers: string): FinalizeValues {
  const { status, body, bodyOmitted } = params.response;
  return {
    scope: params.scope,
    key: params.key,
    owner: params.owner,
    status,
    headers,
    body: toBuffer(body),
    bodyOmitted: dialect.bool(bodyOmitted === true),
    nowMs: params.nowMs,
  };
}

function build(
  driver: Driver,
  dialect: Dialect,
  db: unknown,
  table: string,
  maxBodyBytes: number,
): SqlStore<unknown, Promise<boolean> | boolean> {
  /** Reserve on `on` (the database, or a caller's transaction) through `through`, its driver. */
  async function reserveOn(through: Driver, on: unknown, params: ReserveParams): Promise<ReserveResult> {
    checkReserve(params);
    // A dialect reserves in atomic steps; when the record changed between them (released, purged, taken by
    // another caller) it says so, and the next round starts from what is there now.
    for (let attempt = 0; attempt < RESERVE_ATTEMPTS; attempt++) {
      const outcome = await dialect.reserve(through, on, table, params);
      if (outcome.kind === 'created') {
        return { outcome: 'reserved', record: newReservation(params), tookOver: false };
      }
      if (outcome.kind === 'retry') continue;
      const row = outcome.row ?? (await through.run(on, table, loadShape, params)).rows[0];
      if (row === undefined) continue; // released or purged in between: try again
      const record = toRecord(row);
      if (outcome.kind === 'exists') return { outcome: 'exists', record };
      // Taken over; a dialect that had to read the row back checks it is still ours.
      if (record.owner === params.owner) return { outcome: 'reserved', record, tookOver: true };
      return { outcome: 'exists', record };
    }
    throw new Error(`reserve did not settle after ${RESERVE_ATTEMPTS} attempts (the record keeps changing)`);
  }

  async function loadThrough(through: Driver, ref: RecordRef): Promise<IdempotencyRecord | undefined> {
    checkRef(ref);
    const [row] = (await through.run(db, table, loadShape, ref)).rows;
    return row === undefined ? undefined : toRecord(row);
  }

  /** The finalize statement's values, after checking what the table can hold. */
  const finalizing = (params: FinalizeParams): FinalizeValues =>
    finalizeValues(dialect, params, checkResponse(params, maxBodyBytes));

  return {
    limits: { maxBodyBytes },
    reserve: (params) => transient(() => reserveOn(driver, db, params)),
    load(ref) {
      // better-sqlite3 answers at once, and so does the read (the SPI allows it): a caller in a hurry (a
      // coordinator reading before its transaction) gets the record without a promise. A failure is still a
      // rejected promise.
      const { runSync } = driver;
      if (runSync === undefined) return loadThrough(driver, ref);
      try {
        checkRef(ref);
        const [row] = runSync(db, table, loadShape, ref).rows;
        return row === undefined ? undefined : toRecord(row);
      } catch (error) {
        return Promise.reject(error);
      }
    },
    async finalize(params) {
      const values = finalizing(params);
      return transient(async () => (await driver.run(db, table, finalizeShape, values)).affected === 1);
    },
    inTransaction(tx) {
      const txDriver = driverOf(tx);
      return {
        async reserve(params) {
          try {
            return await reserveOn(txDriver, tx, params);
          } catch (error) {
            // Another transaction holds the key's row (a duplicate still running) longer than the lock wait.
            if (!hasCode(error, LOCK_WAIT_TIMEOUT)) throw error;
            throw new IdemInProgressError('the key is held by a transaction still running', { cause: error });
          }
        },
        finalize(params) {
          // SQLite transactions are synchronous: the finalize must be too, to run inside one.
          if (txDriver.runSync !== undefined) {
            return txDriver.runSync(tx, table, finalizeShape, finalizing(params)).affected === 1;
          }
          return (async () =>
            (await txDriver.run(tx, table, finalizeShape, finalizing(params))).affected === 1)();
        },
        async release(ref) {
          checkRef(ref);
          return (await txDriver.run(tx, table, releaseShape, ref)).affected === 1;
        },
      };
    },
    async release(ref) {
      checkRef(ref);
      return transient(async () => (await driver.run(db, table, releaseShape, ref)).affected === 1);
    },
    async renewLease(params) {
      checkRef(params);
      return transient(async () => (await driver.run(db, table, renewShape, params)).affected === 1);
    },
    async purgeExpired(params) {
      if (!Number.isSafeInteger(params.limit) || params.limit < 1) {
        throw new RangeError(`limit must be a positive integer, got ${params.limit}`);
      }
      return transient(() => dialect.purge(driver, db, table, params));
    },
    async forget(ref) {
      checkRef(ref);
      return transient(async () => (await driver.run(db, table, forgetShape, ref)).affected === 1);
    },
    async list(params) {
      checkListParams(params);
      if (params.scope !== undefined) checkRef({ scope: params.scope, key: '' });
      const after = params.cursor === undefined ? undefined : decodeRecordCursor(params.cursor);
      if (after !== undefined) checkCursorRef(after);
      const bodies = params.bodies === true;
      const { rows } = await driver.execute(db, listStatement(dialect, table, params, after), true);
      const page = rows.slice(0, params.limit).map((row) => toListedRecord(row, bodies));
      const last = page.at(-1);
      return {
        records: page,
        cursor: rows.length > params.limit && last !== undefined ? encodeRecordCursor(last) : null,
      };
    },
    async stats(params) {
      checkStatsParams(params);
      const { scope, nowMs } = params;
      if (scope === undefined) return toStats((await driver.run(db, table, statsShape, params)).rows[0]);
      checkRef({ scope, key: '' });
      return toStats((await driver.run(db, table, statsInScopeShape, { scope, nowMs })).rows[0]);
    },
  };
}
