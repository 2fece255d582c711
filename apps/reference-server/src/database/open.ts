import type { CatalogDatabase } from './catalog-database.js';
import type { Dialect } from './catalog-schema.js';
import type { Tables } from './migrate.js';
import { openMysql } from './mysql.js';
import { type DatabaseOptions, databaseBounds } from './options.js';
import { openPostgres } from './postgres.js';
import { openSqlite } from './sqlite.js';

/**
 * The database a URL names, by its (lower-case: config.ts lowers it) scheme: `postgres://` or
 * `postgresql://`, `mysql://`, and SQLite for the rest (`sqlite:<file>`, `file:<file>`).
 */
export const dialectOf = (url: string): Dialect =>
  /^postgres(ql)?:\/\//.test(url) ? 'postgres' : url.startsWith('mysql://') ? 'mysql' : 'sqlite';

/**
 * Open the catalog on `sqlite:<file>` (or `sqlite::memory:`), `postgres://…` or `mysql://…`; with `tables:
 * 'idempotency'`, a database that holds only the idempotency store's records (IDEMPOTENCY_STORE_URL).
 */
export async function openDatabase(
  url: string,
  options: DatabaseOptions = {},
  tables: Tables = 'catalog',
): Promise<CatalogDatabase> {
  const bounds = databaseBounds(options);
  switch (dialectOf(url)) {
    case 'postgres':
      return openPostgres(url, bounds, tables);
    case 'mysql':
      return openMysql(url, bounds, tables);
    case 'sqlite':
      return openSqlite(url.replace(/^(sqlite|file):/, ''), tables);
  }
}
