import {
  bigint,
  boolean,
  customType,
  index,
  integer,
  pgTable,
  primaryKey,
  text,
  varchar,
} from 'drizzle-orm/pg-core';

const bytea = customType<{ data: Uint8Array; driverData: Uint8Array }>({ dataType: () => 'bytea' });

/**
 * The PostgreSQL table of idempotency records, under the name you choose.
 *
 * @example export const idem = postgresIdempotencyTable('idem_records'); // in your drizzle-kit schema
 */
export function postgresIdempotencyTable(name: string) {
  return pgTable(
    name,
    {
      scope: varchar('scope', { length: 255 }).notNull(),
      key: varchar('idem_key', { length: 255 }).notNull(),
      fingerprint: varchar('fingerprint', { length: 255 }).notNull(),
      owner: varchar('owner', { length: 255 }),
      leaseUntilMs: bigint('lease_until_ms', { mode: 'number' }).notNull(),
      responseStatus: integer('response_status'),
      responseHeaders: text('response_headers'),
      responseBody: bytea('response_body'),
      bodyOmitted: boolean('body_omitted').notNull().default(false),
      createdAtMs: bigint('created_at_ms', { mode: 'number' }).notNull(),
      updatedAtMs: bigint('updated_at_ms', { mode: 'number' }).notNull(),
      expiresAtMs: bigint('expires_at_ms', { mode: 'number' }).notNull(),
    },
    (t) => [primaryKey({ columns: [t.scope, t.key] }), index(`${name}_expires_idx`).on(t.expiresAtMs)],
  );
}

/** The default PostgreSQL table, `idem_records`. */
export const postgresIdempotencyRecords = postgresIdempotencyTable('idem_records');
