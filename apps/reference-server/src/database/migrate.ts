import { createIfMissing, ensureSchema, type SupportedDb, sqlRows, sqlRun } from '@idem/store-sql';
import { sql } from 'drizzle-orm';
import { addedColumns, catalogDdl, type Dialect } from './catalog-schema.js';

/**
 * Which tables a database holds: the catalog's and the idempotency store's, or only the store's (a database
 * of its own for the store: IDEMPOTENCY_STORE_URL).
 */
export type Tables = 'catalog' | 'idempotency';

/**
 * Create the idempotency store's tables and the catalog's, and add the columns a database made by an older
 * server lacks. Safe from many nodes at once: a column another node added first is there when looked for.
 */
export async function migrate(db: SupportedDb, dialect: Dialect, tables: Tables = 'catalog'): Promise<void> {
  await ensureSchema(db, { dialect });
  if (tables === 'idempotency') return;
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
