import {
  bigint,
  boolean,
  customType,
  index,
  int,
  mysqlTable,
  primaryKey,
  text,
} from 'drizzle-orm/mysql-core';

// MySQL compares strings case-insensitively under the default collation (keys `Abc` and `abc` would be one
// record), and even its binary collations ignore trailing spaces. VARBINARY compares the exact UTF-8 bytes,
// as PostgreSQL and SQLite compare text; 1020 bytes hold 255 characters of any script.
const exactVarchar = customType<{ data: string; driverData: Buffer | string }>({
  dataType: () => 'varbinary(1020)',
});
const longblob = customType<{ data: Uint8Array; driverData: Uint8Array }>({ dataType: () => 'longblob' });

/** The MySQL / MariaDB table of idempotency records, under the name you choose. */
export function mysqlIdempotencyTable(name: string) {
  return mysqlTable(
    name,
    {
      scope: exactVarchar('scope').notNull(),
      key: exactVarchar('idem_key').notNull(),
      fingerprint: exactVarchar('fingerprint').notNull(),
      owner: exactVarchar('owner'),
      leaseUntilMs: bigint('lease_until_ms', { mode: 'number' }).notNull(),
      responseStatus: int('response_status'),
      responseHeaders: text('response_headers'),
      responseBody: longblob('response_body'),
      bodyOmitted: boolean('body_omitted').notNull().default(false),
      createdAtMs: bigint('created_at_ms', { mode: 'number' }).notNull(),
      updatedAtMs: bigint('updated_at_ms', { mode: 'number' }).notNull(),
      expiresAtMs: bigint('expires_at_ms', { mode: 'number' }).notNull(),
    },
    (t) => [primaryKey({ columns: [t.scope, t.key] }), index(`${name}_expires_idx`).on(t.expiresAtMs)],
  );
}

/** The default MySQL / MariaDB table, `idem_records`. */
export const mysqlIdempotencyRecords = mysqlIdempotencyTable('idem_records');
