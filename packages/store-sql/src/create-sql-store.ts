import {
  type FinalizeParams,
  type IdempotencyStore,
  newReservation,
  type ReserveParams,
  type ReserveResult,
} from '@idem/core';
import type { Dialect } from './dialects/dialect.js';
import { type MySqlDb, mysql } from './dialects/mysql.js';
import { type PgDb, postgres } from './dialects/postgres.js';
import { type SqliteDb, sqlite, sqliteSync } from './dialects/sqlite.js';
import { checkRef, checkReserve, checkResponse } from './limits.js';
import { toBuffer, toRecord } from './row.js';
import { type FinalizeValues, finalizeShape, loadShape, releaseShape, renewShape } from './statements.js';
import { checkTableName, DEFAULT_TABLE } from './table-name.js';

export interface SqlStoreOptions {
  /** The table of records. @default 'idem_records' */
  readonly table?: string;
  /** Bodies larger than this are refused with an error rather than sent to the database. @default 8 MiB */
  readonly maxBodyBytes?: number;
}

export interface PgStoreOptions extends SqlStoreOptions {
  readonly dialect: 'postgres';
}
export interface MySqlStoreOptions extends SqlStoreOptions {
  readonly dialect: 'mysql';
}
export interface SqliteStoreOptions extends SqlStoreOptions {
  readonly dialect: 'sqlite';
}

/**
 * An {@link IdempotencyStore} over a SQL database, plus a finalize that runs inside the caller's transaction.
 *
 * `Tx` is the dialect's Drizzle transaction; `Done` is `Promise<boolean>`, or `boolean` for SQLite, whose
 * better-sqlite3 transactions are synchronous.
 */
export interface SqlStore<Tx, Done> extends IdempotencyStore {
  /**
   * Finalize inside the caller's own transaction, so that the caller's writes and the idempotency record
   * commit together. Owner-fenced like `finalize`: when it returns `false` the reservation was lost and the
   * caller MUST roll back, or the work could be committed twice.
   */
  finalizeInTransaction(tx: Tx, params: FinalizeParams): Done;
}

type TxOf<Db> = Db extends { transaction(fn: (tx: infer T) => infer _R): unknown } ? T : never;

const DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024;
const RESERVE_ATTEMPTS = 5;

/**
 * Create a store over the user's own Drizzle database. The store never opens or closes the connection; create
 * the table first with {@link ensureSchema} or the shipped drizzle-kit migrations.
 *
 * @example
 * const db = drizzle(new pg.Pool({ connectionString }));
 * await ensureSchema(db, { dialect: 'postgres' });
 * const store = createSqlStore(db, { dialect: 'postgres' });
 */
export function createSqlStore<Db extends PgDb>(
  db: Db,
  options: PgStoreOptions,
): SqlStore<TxOf<Db>, Promise<boolean>>;
export function createSqlStore<Db extends MySqlDb>(
  db: Db,
  options: MySqlStoreOptions,
): SqlStore<TxOf<Db>, Promise<boolean>>;
export function createSqlStore<Db extends SqliteDb>(
  db: Db,
  options: SqliteStoreOptions,
): SqlStore<TxOf<Db>, boolean>;
export function createSqlStore(
  db: PgDb | MySqlDb | SqliteDb,
  options: PgStoreOptions | MySqlStoreOptions | SqliteStoreOptions,
): SqlStore<unknown, unknown> {
  const table = checkTableName(options.table ?? DEFAULT_TABLE);
  const maxBodyBytes = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
  switch (options.dialect) {
    case 'postgres':
      return build(postgres, db as PgDb, table, maxBodyBytes);
    case 'mysql':
      return build(mysql, db as MySqlDb, table, maxBodyBytes);
    case 'sqlite': {
      const store = build(sqlite, db as SqliteDb, table, maxBodyBytes);
      return {
        ...store,
        finalizeInTransaction: (tx, params) => {
          const headers = checkResponse(params, maxBodyBytes);
          return (
            sqliteSync.shapeAffected(
              tx as SqliteDb,
              table,
              finalizeShape,
              finalizeValues(sqlite, params, headers),
            ) === 1
          );
        },
      };
    }
    default:
      throw new TypeError(`unknown dialect ${(options as { dialect: unknown }).dialect}`);
  }
}

function finalizeValues<Db>(dialect: Dialect<Db>, params: FinalizeParams, headers: string): FinalizeValues {
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

function build<Db>(dialect: Dialect<Db>, db: Db, table: string, maxBodyBytes: number): SqlStore<Db, unknown> {
  async function reserve(params: ReserveParams): Promise<ReserveResult> {
    checkReserve(params);
    // A dialect reserves in atomic steps; when the record changed between them (released, purged, taken by
    // another caller) it says so, and the next round starts from what is there now.
    for (let attempt = 0; attempt < RESERVE_ATTEMPTS; attempt++) {
      const outcome = await dialect.reserve(db, table, params);
      if (outcome.kind === 'created') {
        return { outcome: 'reserved', record: newReservation(params), tookOver: false };
      }
      if (outcome.kind === 'retry') continue;
      const row = outcome.row ?? (await dialect.shapeRows(db, table, loadShape, params))[0];
      if (row === undefined) continue; // released or purged in between: try again
      const record = toRecord(row);
      if (outcome.kind === 'exists') return { outcome: 'exists', record };
      // Taken over; a dialect that had to read the row back checks it is still ours.
      if (record.owner === params.owner) return { outcome: 'reserved', record, tookOver: true };
      return { outcome: 'exists', record };
    }
    throw new Error(`reserve did not settle after ${RESERVE_ATTEMPTS} attempts (the record keeps changing)`);
  }

  return {
    limits: { maxBodyBytes },
    reserve,
    async load(ref) {
      checkRef(ref);
      const [row] = await dialect.shapeRows(db, table, loadShape, ref);
      return row === undefined ? undefined : toRecord(row);
    },
    async finalize(params) {
      const headers = checkResponse(params, maxBodyBytes);
      return (
        (await dialect.shapeAffected(db, table, finalizeShape, finalizeValues(dialect, params, headers))) ===
        1
      );
    },
    async finalizeInTransaction(tx, params) {
      const headers = checkResponse(params, maxBodyBytes);
      return (
        (await dialect.shapeAffected(tx, table, finalizeShape, finalizeValues(dialect, params, headers))) ===
        1
      );
    },
    async release(ref) {
      checkRef(ref);
      return (await dialect.shapeAffected(db, table, releaseShape, ref)) === 1;
    },
    async renewLease(params) {
      checkRef(params);
      return (await dialect.shapeAffected(db, table, renewShape, params)) === 1;
    },
    async purgeExpired(params) {
      if (!Number.isSafeInteger(params.limit) || params.limit < 1) {
        throw new RangeError(`limit must be a positive integer, got ${params.limit}`);
      }
      return dialect.purge(db, table, params);
    },
  };
}
