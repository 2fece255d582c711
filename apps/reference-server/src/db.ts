import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import type { FinalizeParams, IdempotencyStore } from '@idem/core';
import { createSqlStore, ensureSchema, type SqlStore } from '@idem/store-sql';
import Database from 'better-sqlite3';
import { type SQL, sql } from 'drizzle-orm';
import { drizzle as sqliteDrizzle } from 'drizzle-orm/better-sqlite3';
import { drizzle as mysqlDrizzle } from 'drizzle-orm/mysql2';
import { drizzle as pgDrizzle } from 'drizzle-orm/node-postgres';
import mysql from 'mysql2/promise';
import pg from 'pg';

export type Row = Record<string, unknown>;

/** Runs statements: on the database, or inside a transaction. */
export interface Executor {
  rows(statement: SQL): Promise<Row[]>;
  run(statement: SQL): Promise<number>;
  /** Finalize an idempotency record in this executor's transaction; false when the reservation was lost. */
  finalize(params: FinalizeParams): Promise<boolean>;
}

export interface CatalogDatabase extends Executor {
  readonly dialect: 'sqlite' | 'postgres' | 'mysql';
  /** The idempotency store over the same database. */
  readonly store: IdempotencyStore;
  /** Run `body` in one transaction: commit when it resolves, roll back when it throws. */
  transaction<T>(body: (tx: Executor) => Promise<T>): Promise<T>;
  ping(): Promise<void>;
  close(): Promise<void>;
}

/** Names are exact on every database: text on SQLite/PostgreSQL, bytes on MySQL (see @idem/store-sql). */
function catalogDdl(dialect: CatalogDatabase['dialect']): string[] {
  // MySQL caps a primary key at 3072 bytes: prefix 255 + namespace 1020 + name 1020 bytes fit.
  const prefix = dialect === 'mysql' ? 'varbinary(255)' : dialect === 'postgres' ? 'varchar(255)' : 'text';
  const name = dialect === 'mysql' ? 'varbinary(1020)' : dialect === 'postgres' ? 'varchar(255)' : 'text';
  const path = dialect === 'mysql' ? 'varbinary(1020)' : dialect === 'postgres' ? 'varchar(1024)' : 'text';
  const text = dialect === 'mysql' ? 'longtext' : 'text';
  return [
    `CREATE TABLE IF NOT EXISTS catalog_namespaces (
      prefix ${prefix} NOT NULL, namespace ${path} NOT NULL, properties ${text} NOT NULL,
      PRIMARY KEY (prefix, namespace))`,
    `CREATE TABLE IF NOT EXISTS catalog_entities (
      prefix ${prefix} NOT NULL, namespace ${path} NOT NULL, name ${name} NOT NULL, kind varchar(8) NOT NULL,
      uuid varchar(64) NOT NULL, metadata_location ${text} NOT NULL, metadata ${text} NOT NULL,
      PRIMARY KEY (prefix, namespace, name))`,
    // Replays find a table or view by its UUID, wherever it has been renamed to since.
    `CREATE INDEX ${dialect === 'mysql' ? '' : 'IF NOT EXISTS '}catalog_entities_uuid ON catalog_entities (uuid)`,
  ];
}

// Two nodes starting at once race on CREATE TABLE IF NOT EXISTS; losing that race means the table is there.
const ALREADY_THERE = new Set(['42P07', '42710', '23505', 'ER_TABLE_EXISTS_ERROR', 'ER_DUP_KEYNAME']);

async function createCatalogTables(
  run: (ddl: string) => Promise<unknown>,
  dialect: CatalogDatabase['dialect'],
) {
  for (const ddl of catalogDdl(dialect)) {
    try {
      await run(ddl);
    } catch (error) {
      let e: unknown = error;
      while (
        typeof e === 'object' &&
        e !== null &&
        !ALREADY_THERE.has(String((e as { code?: unknown }).code))
      ) {
        e = (e as { cause?: unknown }).cause;
      }
      if (e === undefined || e === null) throw error;
    }
  }
}

/** A mutex for the single SQLite connection: a transaction must not interleave with other statements. */
function serial() {
  let tail: Promise<unknown> = Promise.resolve();
  return <T>(task: () => Promise<T>): Promise<T> => {
    const run = tail.then(task, task);
    tail = run.catch(() => {});
    return run;
  };
}

/** How a driver reports rows and affected-row counts through Drizzle's `execute`. */
interface ResultShape {
  rows(result: unknown): Row[];
  count(result: unknown): number;
}

interface PooledDrizzle<Tx> {
  execute(statement: SQL): Promise<unknown>;
  transaction<T>(body: (tx: Tx) => Promise<T>): Promise<T>;
}

/** A CatalogDatabase over a pooled server database (PostgreSQL, MySQL): transactions are the driver's own. */
async function pooled<Tx extends { execute(statement: SQL): Promise<unknown> }>(
  dialect: 'postgres' | 'mysql',
  db: PooledDrizzle<Tx>,
  store: SqlStore<Tx, Promise<boolean>>,
  result: ResultShape,
  close: () => Promise<void>,
): Promise<CatalogDatabase> {
  const executor = (on: { execute(q: SQL): Promise<unknown> }, finalize: Executor['finalize']): Executor => ({
    rows: async (q) => result.rows(await on.execute(q)),
    run: async (q) => result.count(await on.execute(q)),
    finalize,
  });
  await createCatalogTables((ddl) => db.execute(sql.raw(ddl)), dialect);
  return {
    dialect,
    store,
    ...executor(db, (params) => store.finalize(params)),
    transaction: (body) =>
      db.transaction((tx) => body(executor(tx, (params) => store.finalizeInTransaction(tx, params)))),
    ping: async () => void (await db.execute(sql`SELECT 1`)),
    close,
  };
}

export async function openDatabase(url: string): Promise<CatalogDatabase> {
  if (url.startsWith('postgres://') || url.startsWith('postgresql://')) {
    const pool = new pg.Pool({ connectionString: url, max: 10 });
    pool.on('error', () => {}); // an idle client whose backend died: the pool replaces it
    const db = pgDrizzle(pool);
    await ensureSchema(db, { dialect: 'postgres' });
    return pooled(
      'postgres',
      db,
      createSqlStore(db, { dialect: 'postgres' }),
      {
        rows: (r) => (r as { rows: Row[] }).rows,
        count: (r) => (r as { rowCount: number | null }).rowCount ?? 0,
      },
      () => pool.end(),
    );
  }
  if (url.startsWith('mysql://')) {
    const pool = mysql.createPool({ uri: url, connectionLimit: 10 });
    const db = mysqlDrizzle(pool);
    await ensureSchema(db, { dialect: 'mysql' });
    return pooled(
      'mysql',
      db,
      createSqlStore(db, { dialect: 'mysql' }),
      {
        rows: (r) => (r as [Row[]])[0],
        count: (r) => (r as [{ affectedRows: number }])[0].affectedRows,
      },
      () => pool.end(),
    );
  }
  const file = url.replace(/^(sqlite|file):/, '');
  if (file !== ':memory:') mkdirSync(dirname(file), { recursive: true });
  const connection = new Database(file, { timeout: 10_000 });
  connection.pragma('journal_mode = WAL');
  const db = sqliteDrizzle(connection);
  const store = createSqlStore(db, { dialect: 'sqlite' });
  await ensureSchema(db, { dialect: 'sqlite' });
  for (const ddl of catalogDdl('sqlite')) connection.exec(ddl);
  // One connection for the whole process: every statement and every transaction takes its turn, so that a
  // transaction's statements never interleave with another request's.
  const exclusive = serial();
  const direct: Executor = {
    rows: async (q) => db.all<Row>(q),
    run: async (q) => db.run(q).changes,
    // Inside `transaction` below the connection itself is in the transaction (BEGIN IMMEDIATE), so the
    // synchronous transactional finalize runs on it directly.
    finalize: async (params) =>
      store.finalizeInTransaction(db as unknown as Parameters<typeof store.finalizeInTransaction>[0], params),
  };
  return {
    dialect: 'sqlite',
    // The coordinator's own store calls take their turn too, or they could land inside an open transaction.
    store: {
      reserve: (p) => exclusive(() => store.reserve(p)),
      load: (p) => exclusive(() => store.load(p)),
      finalize: (p) => exclusive(() => store.finalize(p)),
      release: (p) => exclusive(() => store.release(p)),
      renewLease: (p) => exclusive(() => store.renewLease(p)),
      purgeExpired: (p) => exclusive(() => store.purgeExpired(p)),
    },
    rows: (q) => exclusive(() => direct.rows(q)),
    run: (q) => exclusive(() => direct.run(q)),
    finalize: (params) => exclusive(() => direct.finalize(params)),
    transaction: (body) =>
      exclusive(async () => {
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
    ping: () => exclusive(async () => void db.all(sql`SELECT 1`)),
    close: async () => void connection.close(),
  };
}
