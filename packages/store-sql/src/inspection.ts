import {
  IdemStoreLimitError,
  type ListParams,
  type RecordRef,
  type StatsParams,
  type StoreStats,
} from '@idem/core';
import { type SQL, sql } from 'drizzle-orm';
import type { Dialect } from './dialects/dialect.js';
import { checkRef } from './limits.js';
import { COLUMNS, type RawRow } from './row.js';
import type { Shape } from './statement-cache.js';

// The statements of the optional inspection methods (`list`, `stats`; `forget` is a shape in statements.ts).
// `list` is built per call, through Drizzle: its text varies with its filters, and it is for operators, off the
// requests' path. `stats` has two fixed shapes, prepared like the request statements.

const id = sql.identifier;

/** The state conditions of `list` and `stats`: `expired` from `expiresAtMs <= nowMs` on, whatever it holds. */
const live = (nowMs: unknown): SQL => sql`${id('expires_at_ms')} > ${nowMs}`;
const inFlight = (nowMs: unknown): SQL => sql`${live(nowMs)} AND ${id('response_status')} IS NULL`;
const completed = (nowMs: unknown): SQL => sql`${live(nowMs)} AND ${id('response_status')} IS NOT NULL`;
const expired = (nowMs: unknown): SQL => sql`${id('expires_at_ms')} <= ${nowMs}`;
const STATE_CONDITIONS = { 'in-flight': inFlight, completed, expired } as const;

/**
 * A cursor's (scope, key) is one this store may have listed, else it is foreign: a `RangeError`, never a value
 * sent to the database that it cannot compare (NUL in PostgreSQL) or would compare mangled (a lone surrogate).
 */
export function checkCursorRef(ref: RecordRef): void {
  try {
    checkRef(ref);
  } catch (error) {
    if (!(error instanceof IdemStoreLimitError)) throw error;
    throw new RangeError(`malformed cursor: not a position of this store (${error.message})`, {
      cause: error,
    });
  }
}

/**
 * One page of `list`: `limit + 1` rows, so that a short read says there is no next page. Within a scope the
 * rows are ordered by key alone (the scope is fixed: MariaDB sorts `scope = ? ORDER BY scope, idem_key` in a
 * filesort, and walks the primary key for `ORDER BY idem_key`).
 *
 * After a cursor, the database compares: the key, when the cursor is in the listed scope (an equality, the one
 * comparison that means the same in every collation, decides that); the scope otherwise, a cursor of another
 * filter, which stands before the whole scope or after it.
 */
export function listStatement(
  dialect: Dialect,
  table: string,
  params: ListParams,
  after: RecordRef | undefined,
): SQL {
  const { scope, state, nowMs, limit } = params;
  const where: SQL[] = [];
  if (scope !== undefined) {
    where.push(sql`${id('scope')} = ${scope}`);
    if (after !== undefined) {
      where.push(
        after.scope === scope ? sql`${id('idem_key')} > ${after.key}` : sql`${id('scope')} > ${after.scope}`,
      );
    }
  } else if (after !== undefined) {
    where.push(dialect.after(after));
  }
  if (state !== undefined) where.push(STATE_CONDITIONS[state](nowMs));
  const columns = COLUMNS.filter((name) => name !== 'response_body' || params.bodies === true).map((name) =>
    id(name),
  );
  const order = scope === undefined ? sql`${id('scope')}, ${id('idem_key')}` : id('idem_key');
  return sql`SELECT ${sql.join(columns, sql`, `)}, ${dialect.byteLength(sql`${id('response_body')}`)} AS ${id('body_bytes')}
    FROM ${id(table)}
    ${where.length === 0 ? sql`` : sql`WHERE ${sql.join(where, sql` AND `)}`}
    ORDER BY ${order} LIMIT ${limit + 1}`;
}

/** Every count of `stats` in one aggregate pass; COUNT of a CASE without ELSE counts the rows it holds for. */
const statsColumns = (nowMs: unknown): SQL => sql`
  COUNT(CASE WHEN ${inFlight(nowMs)} THEN 1 END) AS ${id('in_flight')},
  COUNT(CASE WHEN ${inFlight(nowMs)} AND ${id('lease_until_ms')} <= ${nowMs} THEN 1 END) AS ${id('lease_lapsed')},
  COUNT(CASE WHEN ${completed(nowMs)} THEN 1 END) AS ${id('completed')},
  COUNT(CASE WHEN ${expired(nowMs)} THEN 1 END) AS ${id('expired')},
  MIN(CASE WHEN ${inFlight(nowMs)} THEN ${id('created_at_ms')} END) AS ${id('oldest_in_flight')}`;

export const statsShape: Shape<StatsParams> = {
  id: 'stats',
  build: (table, p) => sql`SELECT ${statsColumns(p.nowMs)} FROM ${id(table)}`,
};

export const statsInScopeShape: Shape<{ readonly nowMs: number; readonly scope: string }> = {
  id: 'stats-scope',
  build: (table, p) =>
    sql`SELECT ${statsColumns(p.nowMs)} FROM ${id(table)} WHERE ${id('scope')} = ${p.scope}`,
};

/** The one row of a stats statement; counts come back as numbers, bigint strings or bigints by driver. */
export function toStats(row: RawRow | undefined): StoreStats {
  const count = (value: unknown): number => (value === null || value === undefined ? 0 : Number(value));
  const oldest = row?.oldest_in_flight;
  return {
    inFlight: count(row?.in_flight),
    leaseLapsed: count(row?.lease_lapsed),
    completed: count(row?.completed),
    expired: count(row?.expired),
    oldestInFlightCreatedAtMs: oldest === null || oldest === undefined ? null : Number(oldest),
  };
}
