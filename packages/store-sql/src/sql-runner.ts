import type { SQL } from 'drizzle-orm';
import type { MysqlDb } from './dialects/mysql.js';
import type { PostgresDb } from './dialects/postgres.js';
import type { SqliteDb } from './dialects/sqlite.js';
import { driverOf } from './drivers/index.js';
import type { RawRow } from './row.js';

/** Any database or transaction the store runs on. */
export type SupportedDb = PostgresDb | MysqlDb | SqliteDb;

/**
 * The rows of a query on any supported Drizzle database or transaction, whatever its driver returns them as.
 *
 * @example const rows = await sqlRows(tx, sql`SELECT name FROM catalog WHERE id = ${id}`);
 */
export async function sqlRows(db: SupportedDb, statement: SQL): Promise<RawRow[]> {
  return (await driverOf(db).execute(db, statement, true)).rows;
}

/**
 * Run a write on any supported Drizzle database or transaction and return how many rows it matched: the
 * same on every driver (MySQL's "Rows matched", not its "changed"), so that a fenced UPDATE reads alike.
 */
export async function sqlRun(db: SupportedDb, statement: SQL): Promise<number> {
  return (await driverOf(db).execute(db, statement, false)).affected;
}
