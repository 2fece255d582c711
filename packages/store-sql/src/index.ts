export {
  createSqlStore,
  type MysqlStoreOptions,
  type PostgresStoreOptions,
  type SqliteStoreOptions,
  type SqlStore,
  type SqlStoreOptions,
} from './create-sql-store.js';
export type { DialectName } from './dialects/dialect.js';
export type { MysqlDb } from './dialects/mysql.js';
export type { PostgresDb } from './dialects/postgres.js';
export type { SqliteDb } from './dialects/sqlite.js';
export {
  createIfMissing,
  type EnsureSchemaOptions,
  ensureSchema,
  schemaStatements,
} from './ensure-schema.js';
export { MAX_HEADERS_BYTES, MAX_IDENTIFIER_CHARS, SqlStoreLimitError } from './limits.js';
export type { RawRow } from './row.js';
export { mysqlIdempotencyRecords, mysqlIdempotencyTable } from './schema/mysql.js';
export { postgresIdempotencyRecords, postgresIdempotencyTable } from './schema/postgres.js';
export { sqliteIdempotencyRecords, sqliteIdempotencyTable } from './schema/sqlite.js';
export { type SupportedDb, sqlRows, sqlRun } from './sql-runner.js';
export { DEFAULT_TABLE } from './table-name.js';

import type { MysqlStoreOptions, PostgresStoreOptions } from './create-sql-store.js';
import type { MysqlDb } from './dialects/mysql.js';
import type { PostgresDb } from './dialects/postgres.js';
import { postgresIdempotencyRecords, postgresIdempotencyTable } from './schema/postgres.js';

/** @deprecated Renamed {@link PostgresDb}; this name goes in the next minor release. */
export type PgDb = PostgresDb;
/** @deprecated Renamed {@link MysqlDb}; this name goes in the next minor release. */
export type MySqlDb = MysqlDb;
/** @deprecated Renamed {@link PostgresStoreOptions}; this name goes in the next minor release. */
export type PgStoreOptions = PostgresStoreOptions;
/** @deprecated Renamed {@link MysqlStoreOptions}; this name goes in the next minor release. */
export type MySqlStoreOptions = MysqlStoreOptions;
/** @deprecated Renamed {@link postgresIdempotencyTable}; this name goes in the next minor release. */
export const pgIdempotencyTable = postgresIdempotencyTable;
/** @deprecated Renamed {@link postgresIdempotencyRecords}; this name goes in the next minor release. */
export const pgIdempotencyRecords = postgresIdempotencyRecords;
