import type { OwnedRecordRef, RecordRef, RenewLeaseParams } from '@idem/core';
import { type SQL, sql } from 'drizzle-orm';
import { COLUMNS } from './row.js';
import type { Shape } from './statement-cache.js';

// Statements that read the same on every dialect. Identifiers go through sql.identifier, so each dialect
// quotes them its own way ("x" or `x`) when the query is built.

export const columnList: SQL = sql.join(
  COLUMNS.map((name) => sql.identifier(name)),
  sql`, `,
);

const whereRecord = (ref: RecordRef): SQL =>
  sql`${sql.identifier('scope')} = ${ref.scope} AND ${sql.identifier('idem_key')} = ${ref.key}`;

/** The record is in flight and held by this owner: the fence of finalize, release and renewLease. */
const whereOwned = (ref: OwnedRecordRef): SQL =>
  sql`${whereRecord(ref)} AND ${sql.identifier('owner')} = ${ref.owner} AND ${sql.identifier('response_status')} IS NULL`;

/** The values of a finalize, flat so that each can be a placeholder. */
export interface FinalizeValues extends OwnedRecordRef {
  readonly status: number;
  readonly headers: string;
  readonly body: unknown;
  readonly bodyOmitted: unknown;
  readonly nowMs: number;
}

export const loadShape: Shape<RecordRef> = {
  id: 'load',
  build: (table, ref) => sql`SELECT ${columnList} FROM ${sql.identifier(table)} WHERE ${whereRecord(ref)}`,
};

export const finalizeShape: Shape<FinalizeValues> = {
  id: 'finalize',
  build: (table, v) => sql`UPDATE ${sql.identifier(table)} SET
    ${sql.identifier('owner')} = NULL,
    ${sql.identifier('response_status')} = ${v.status},
    ${sql.identifier('response_headers')} = ${v.headers},
    ${sql.identifier('response_body')} = ${v.body},
    ${sql.identifier('body_omitted')} = ${v.bodyOmitted},
    ${sql.identifier('updated_at_ms')} = ${v.nowMs}
    WHERE ${whereOwned(v)}`,
};

export const releaseShape: Shape<OwnedRecordRef> = {
  id: 'release',
  build: (table, ref) => sql`DELETE FROM ${sql.identifier(table)} WHERE ${whereOwned(ref)}`,
};

/** An operator's delete: the record, whatever its state or owner. */
export const forgetShape: Shape<RecordRef> = {
  id: 'forget',
  build: (table, ref) => sql`DELETE FROM ${sql.identifier(table)} WHERE ${whereRecord(ref)}`,
};

export const renewShape: Shape<RenewLeaseParams> = {
  id: 'renew',
  build: (
    table,
    v,
  ) => sql`UPDATE ${sql.identifier(table)} SET ${sql.identifier('lease_until_ms')} = ${v.leaseUntilMs}
    WHERE ${whereOwned(v)}`,
};
