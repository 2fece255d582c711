import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import type { ConformanceOptions, StoreUnderTest } from '@idem/store-conformance';
import { createSqlStore, ensureSchema } from '@idem/store-sql';
import Database from 'better-sqlite3';
import { sql } from 'drizzle-orm';
import { drizzle as sqliteDrizzle } from 'drizzle-orm/better-sqlite3';
import { drizzle as mysqlDrizzle } from 'drizzle-orm/mysql2';
import { drizzle as pgDrizzle } from 'drizzle-orm/node-postgres';
import { drizzle as pgliteDrizzle } from 'drizzle-orm/pglite';
import { drizzle as postgresJsDrizzle } from 'drizzle-orm/postgres-js';
import mysql from 'mysql2/promise';
import pg from 'pg';
import postgresJs from 'postgres';

export const PG_URL = process.env.PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
export const MYSQL_URL = process.env.MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/test';

/** The kit's options for every SQL store: it has all three optional inspection methods. */
export const INSPECTION: ConformanceOptions = { inspection: ['forget', 'list', 'stats'] };

/** A table name no other test or run uses. */
export const uniqueTable = (): string => `idem_t_${randomBytes(6).toString('hex')}`;

/**
 * Whether a database server answers. Under CI=true a missing server is a failure, never a skip; elsewhere
 * the suite is skipped with the reason printed.
 */
export async function serverAvailable(name: string, probe: () => Promise<unknown>): Promise<boolean> {
  try {
    await probe();
    return true;
  } catch (error) {
    const reason = `${name} is not reachable (${(error as Error).message})`;
    if (process.env.CI === 'true') throw new Error(`${reason}; under CI=true every database suite must run`);
    console.warn(`skipping the ${name} suites: ${reason}`);
    return false;
  }
}

export const pgUp = () =>
  serverAvailable('PostgreSQL', async () => {
    const client = new pg.Client({ connectionString: PG_URL, connectionTimeoutMillis: 3_000 });
    await client.connect();
    await client.end();
  });

export const mysqlUp = () =>
  serverAvailable('MariaDB/MySQL', async () => {
    const connection = await mysql.createConnection({ uri: MYSQL_URL, connectTimeout: 3_000 });
    await connection.end();
  });

/** The tables `table` and `also` (a test's own), for one DROP statement. */
const tables = (table: string, also: readonly string[]) =>
  sql.join(
    [table, ...also].map((name) => sql.identifier(name)),
    sql`, `,
  );

/**
 * A fresh table of records on PostgreSQL over a node-postgres pool of `max` connections, and its store;
 * `drop` drops it (and `also`, tables of the test's own) and ends the pool.
 */
export async function pgTable(max: number) {
  const table = uniqueTable();
  const pool = new pg.Pool({ connectionString: PG_URL, max });
  const db = pgDrizzle(pool);
  await ensureSchema(db, { dialect: 'postgres', table });
  return {
    table,
    pool,
    db,
    store: createSqlStore(db, { dialect: 'postgres', table }),
    async drop(...also: string[]) {
      await db.execute(sql`DROP TABLE IF EXISTS ${tables(table, also)}`);
      await pool.end();
    },
  };
}

/** The same on MariaDB/MySQL, over a mysql2 pool of `connectionLimit` connections. */
export async function mysqlTable(connectionLimit: number) {
  const table = uniqueTable();
  const pool = mysql.createPool({ uri: MYSQL_URL, connectionLimit });
  const db = mysqlDrizzle(pool);
  await ensureSchema(db, { dialect: 'mysql', table });
  return {
    table,
    pool,
    db,
    store: createSqlStore(db, { dialect: 'mysql', table }),
    async drop(...also: string[]) {
      await db.execute(sql`DROP TABLE IF EXISTS ${tables(table, also)}`);
      await pool.end();
    },
  };
}

/** A fresh table on PostgreSQL; `connect` opens a second pool on the same table, as another node would. */
export async function makePgStore(): Promise<StoreUnderTest> {
  const { table, store, drop } = await pgTable(4);
  return {
    store,
    async connect() {
      const other = new pg.Pool({ connectionString: PG_URL, max: 4 });
      return {
        ...createSqlStore(pgDrizzle(other), { dialect: 'postgres', table }),
        close: () => other.end(),
      };
    },
    cleanup: () => drop(),
  };
}

/** A fresh table on PostgreSQL through postgres-js; `connect` opens a second client on the same table. */
export async function makePostgresJsStore(): Promise<StoreUnderTest> {
  const table = uniqueTable();
  const client = postgresJs(PG_URL, { max: 4, onnotice: () => {} });
  const db = postgresJsDrizzle(client);
  await ensureSchema(db, { dialect: 'postgres', table });
  return {
    store: createSqlStore(db, { dialect: 'postgres', table }),
    async connect() {
      const other = postgresJs(PG_URL, { max: 4, onnotice: () => {} });
      return {
        ...createSqlStore(postgresJsDrizzle(other), { dialect: 'postgres', table }),
        close: () => other.end(),
      };
    },
    async cleanup() {
      await db.execute(sql`DROP TABLE IF EXISTS ${sql.identifier(table)}`);
      await client.end();
    },
  };
}

/** A fresh table on MariaDB/MySQL, with a second pool per `connect`. */
export function makeMysqlStore() {
  return async (): Promise<StoreUnderTest> => {
    const { table, store, drop } = await mysqlTable(4);
    return {
      store,
      async connect() {
        const other = mysql.createPool({ uri: MYSQL_URL, connectionLimit: 4 });
        return {
          ...createSqlStore(mysqlDrizzle(other), { dialect: 'mysql', table }),
          close: () => other.end(),
        };
      },
      cleanup: () => drop(),
    };
  };
}

/** A fresh SQLite file; `connect` opens another connection to the same file. */
export async function makeSqliteFileStore(): Promise<StoreUnderTest> {
  const dir = mkdtempSync(join(tmpdir(), 'idem-sqlite-'));
  const file = join(dir, 'idem.db');
  const open = () => {
    const connection = new Database(file, { timeout: 10_000 });
    connection.pragma('journal_mode = WAL');
    return connection;
  };
  const connection = open();
  const db = sqliteDrizzle(connection);
  await ensureSchema(db, { dialect: 'sqlite' });
  const opened = [connection];
  return {
    store: createSqlStore(db, { dialect: 'sqlite' }),
    async connect() {
      const other = open();
      opened.push(other);
      return {
        ...createSqlStore(sqliteDrizzle(other), { dialect: 'sqlite' }),
        close: async () => void other.close(),
      };
    },
    async cleanup() {
      for (const c of opened) if (c.open) c.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** An in-memory SQLite database: one connection, so no `connect`. */
export async function makeSqliteMemoryStore(): Promise<StoreUnderTest> {
  const connection = new Database(':memory:');
  const db = sqliteDrizzle(connection);
  await ensureSchema(db, { dialect: 'sqlite' });
  return { store: createSqlStore(db, { dialect: 'sqlite' }), cleanup: async () => void connection.close() };
}

/** One PGlite instance shared by a file's tests (it takes a while to start); a fresh table per test. */
export function pgliteFactory() {
  let shared: Promise<PGlite> | undefined;
  return async (): Promise<StoreUnderTest> => {
    shared ??= PGlite.create();
    const db = pgliteDrizzle(await shared);
    const table = uniqueTable();
    await ensureSchema(db, { dialect: 'postgres', table });
    return {
      store: createSqlStore(db, { dialect: 'postgres', table }),
      cleanup: async () => void (await db.execute(sql`DROP TABLE ${sql.identifier(table)}`)),
    };
  };
}
