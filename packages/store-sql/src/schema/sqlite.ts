import { blob, index, integer, primaryKey, sqliteTable, text } from 'drizzle-orm/sqlite-core';

/** The SQLite table of idempotency records, under the name you choose. */
export function sqliteIdempotencyTable(name: string) {
  return sqliteTable(
    name,
    {
      scope: text('scope').notNull(),
      key: text('idem_key').notNull(),
      fingerprint: text('fingerprint').notNull(),
      owner: text('owner'),
      leaseUntilMs: integer('lease_until_ms', { mode: 'number' }).notNull(),
      responseStatus: integer('response_status'),
      responseHeaders: text('response_headers'),
      responseBody: blob('response_body', { mode: 'buffer' }),
      bodyOmitted: integer('body_omitted', { mode: 'boolean' }).notNull().default(false),
      createdAtMs: integer('created_at_ms', { mode: 'number' }).notNull(),
      updatedAtMs: integer('updated_at_ms', { mode: 'number' }).notNull(),
      expiresAtMs: integer('expires_at_ms', { mode: 'number' }).notNull(),
    },
    (t) => [primaryKey({ columns: [t.scope, t.key] }), index(`${name}_expires_idx`).on(t.expiresAtMs)],
  );
}

/** The default SQLite table, `idem_records`. */
export const sqliteIdempotencyRecords = sqliteIdempotencyTable('idem_records');
