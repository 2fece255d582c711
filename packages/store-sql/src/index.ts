export {
  createSqlStore,
  type MysqlStoreOptions,
  type PostgresStoreOptions,
  type SqliteStoreOptions,
  type SqlStore,
  type SqlStoreOptions,
  type SqlTransactionalStore,
} from './create-sql-store.js';
export type { DialectName } from './dialect-name.js';
export type { MysqlDb } from './dialects/mysql.js';
export type { PostgresDb } from './dialects/postgres.js';
export type { SqliteDb } from './dialects/sqlite.js';
export {
  createIfMissing,
  type EnsureSchemaOptions,
  ensureSchema,
  schemaStatements,
} from './ensure-schema.js';
export { MAX_HEADERS_BYTES, MAX_IDENTIFIER_CHARS } from './limits.js';
export type { RawRow } from './row.js';
export { mysqlIdempotencyRecords, mysqlIdempotencyTable } from './schema/mysql.js';
export { postgresIdempotencyRecords, postgresIdempotencyTable } from './schema/postgres.js';
export { sqliteIdempotencyRecords, sqliteIdempotencyTable } from './schema/sqlite.js';
export { type SupportedDb, sqlRows, sqlRun } from './sql-runner.js';
export { DEFAULT_TABLE } from './table-name.js';
