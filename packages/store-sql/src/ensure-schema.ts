import { sql } from 'drizzle-orm';
import { migrations } from './migrations.generated.js';
import { type SupportedDb, sqlRun } from './sql-runner.js';
import { checkTableName, DEFAULT_TABLE } from './table-name.js';

export type EnsureSchemaOptions =
  | { readonly dialect: 'postgres'; readonly table?: string }
  | { readonly dialect: 'mysql'; readonly table?: string }
  | { readonly dialect: 'sqlite'; readonly table?: string };

/**
 * The DDL that creates the records table and its expiry index under `table`: the shipped drizzle-kit
 * migration, renamed, with `IF NOT EXISTS` so that it can run on every start.
 */
export function schemaStatements(dialect: EnsureSchemaOptions['dialect'], table = DEFAULT_TABLE): string[] {
  const name = checkTableName(table);
  return migrations[dialect]
    .flatMap((file) => file.split('--> statement-breakpoint'))
    .map((statement) =>
      statement
        .trim()
        .replaceAll(DEFAULT_TABLE, name)
        .replace(/^CREATE TABLE /, 'CREATE TABLE IF NOT EXISTS ')
        .replace(/^CREATE INDEX /, 'CREATE INDEX IF NOT EXISTS '),
    )
    .filter((statement) => statement !== '');
}

// Errors that mean "another node created it first": PostgreSQL duplicate_table, duplicate_object (the
// table's row type) and unique_violation (two CREATE TABLE IF NOT EXISTS racing on the system catalogs, each
// seen in this project's own race test), MySQL duplicate key name (MySQL 8 has no CREATE INDEX IF NOT EXISTS).
const ALREADY_THERE = new Set(['42P07', '42710', '23505', 'ER_DUP_KEYNAME', 'ER_TABLE_EXISTS_ERROR']);

function alreadyThere(error: unknown): boolean {
  for (let e: unknown = error; typeof e === 'object' && e !== null; e = (e as { cause?: unknown }).cause) {
    if (ALREADY_THERE.has(String((e as { code?: unknown }).code))) return true;
  }
  return false;
}

/**
 * Run DDL that creates what is missing (`CREATE … IF NOT EXISTS`), from many nodes at once: losing the race to
 * another node that created the same table or index first is success, not an error.
 *
 * @example await createIfMissing(db, ['CREATE TABLE IF NOT EXISTS catalog (id text PRIMARY KEY)']);
 */
export async function createIfMissing(db: SupportedDb, statements: readonly string[]): Promise<void> {
  for (const statement of statements) {
    try {
      await sqlRun(db, sql.raw(statement));
    } catch (error) {
      if (!alreadyThere(error)) throw error;
    }
  }
}

/**
 * Create the records table and its index if they do not exist. Explicit and async: call it at start-up or
 * from your migration step, never implicitly. Safe to run from many nodes at once.
 */
export async function ensureSchema(db: SupportedDb, options: EnsureSchemaOptions): Promise<void> {
  await createIfMissing(
    db,
    schemaStatements(options.dialect, options.table).map((statement) =>
      options.dialect === 'mysql'
        ? statement.replace('CREATE INDEX IF NOT EXISTS', 'CREATE INDEX')
        : statement,
    ),
  );
}
