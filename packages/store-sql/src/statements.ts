import type { FinalizeParams, OwnedRecordRef, RecordRef, RenewLeaseParams } from '@idem/core';
import { type SQL, sql } from 'drizzle-orm';
import { COLUMNS } from './row.js';

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

export function loadStatement(table: string, ref: RecordRef): SQL {
  return sql`SELECT ${columnList} FROM ${sql.identifier(table)} WHERE ${whereRecord(ref)}`;
}

export function finalizeStatement(
  table: string,
  params: FinalizeParams,
  headers: string,
  body: unknown,
  bodyOmitted: unknown,
): SQL {
  return sql`UPDATE ${sql.identifier(table)} SET
    ${sql.identifier('owner')} = NULL,
    ${sql.identifier('response_status')} = ${params.response.status},
    ${sql.identifier('response_headers')} = ${headers},
    ${sql.identifier('response_body')} = ${body},
    ${sql.identifier('body_omitted')} = ${bodyOmitted},
    ${sql.identifier('updated_at_ms')} = ${params.nowMs}
    WHERE ${whereOwned(params)}`;
}

export function releaseStatement(table: string, ref: OwnedRecordRef): SQL {
  return sql`DELETE FROM ${sql.identifier(table)} WHERE ${whereOwned(ref)}`;
}

export function renewStatement(table: string, params: RenewLeaseParams): SQL {
  return sql`UPDATE ${sql.identifier(table)} SET ${sql.identifier('lease_until_ms')} = ${params.leaseUntilMs}
    WHERE ${whereOwned(params)}`;
}
