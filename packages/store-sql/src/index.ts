export {
  createSqlStore,
  type MySqlStoreOptions,
  type PgStoreOptions,
  type SqliteStoreOptions,
  type SqlStore,
  type SqlStoreOptions,
} from './create-sql-store.js';
export type { MySqlDb } from './dialects/mysql.js';
export type { PgDb } from './dialects/postgres.js';
export type { SqliteDb } from './dialects/sqlite.js';
export { type EnsureSchemaOptions, ensureSchema, schemaStatements } from './ensure-schema.js';
export { MAX_HEADERS_BYTES, MAX_IDENTIFIER_CHARS, SqlStoreLimitError } from './limits.js';
export { mysqlIdempotencyRecords, mysqlIdempotencyTable } from './schema/mysql.js';
export { pgIdempotencyRecords, pgIdempotencyTable } from './schema/pg.js';
export { sqliteIdempotencyRecords, sqliteIdempotencyTable } from './schema/sqlite.js';
export { DEFAULT_TABLE } from './table-name.js';
