import { decideReservation, type RecordRef, type ReserveParams } from '@idem/core';
import { sql } from 'drizzle-orm';
import type { Driver } from '../drivers/driver.js';
import { toRecord } from '../row.js';
import type { Shape } from '../statement-cache.js';
import { columnList, loadShape } from '../statements.js';
import type { ReserveOutcome } from './dialect.js';

const id = sql.identifier;

/**
 * `(scope, idem_key) > (…)`, a row-value comparison: PostgreSQL and SQLite (3.15+) take it as a range condition
 * on the primary key (`Index Cond` / `SEARCH … USING INDEX ((scope,idem_key)>(?,?))`).
 */
export const afterByRowValue = (ref: RecordRef) =>
  sql`(${id('scope')}, ${id('idem_key')}) > (${ref.scope}, ${ref.key})`;

/** The shapes of a reserve in steps, for dialects with `ON CONFLICT` and `RETURNING` (PostgreSQL, SQLite). */
export interface ReserveShapes {
  readonly insert: Shape<ReserveParams>;
  readonly replace: Shape<ReserveParams>;
  readonly takeOver: Shape<ReserveParams>;
}

/** The reserve statements of PostgreSQL and SQLite, which share this grammar; `bool` binds a boolean. */
export function reserveShapes(bool: (value: boolean) => unknown): ReserveShapes {
  const pk = (p: ReserveParams) => sql`${id('scope')} = ${p.scope} AND ${id('idem_key')} = ${p.key}`;
  return {
    insert: {
      id: 'reserve-insert',
      build: (table, p) => sql`INSERT INTO ${id(table)} (${columnList})
        VALUES (${p.scope}, ${p.key}, ${p.fingerprint}, ${p.owner}, ${p.leaseUntilMs}, NULL, NULL, NULL,
          ${bool(false)}, ${p.nowMs}, ${p.nowMs}, ${p.expiresAtMs})
        ON CONFLICT (${id('scope')}, ${id('idem_key')}) DO NOTHING`,
    },
    // An expired record, whatever its state, becomes exactly the caller's new reservation.
    replace: {
      id: 'reserve-replace',
      build: (table, p) => sql`UPDATE ${id(table)} SET
        ${id('fingerprint')} = ${p.fingerprint}, ${id('owner')} = ${p.owner},
        ${id('lease_until_ms')} = ${p.leaseUntilMs}, ${id('response_status')} = NULL,
        ${id('response_headers')} = NULL, ${id('response_body')} = NULL, ${id('body_omitted')} = ${bool(false)},
        ${id('created_at_ms')} = ${p.nowMs}, ${id('updated_at_ms')} = ${p.nowMs},
        ${id('expires_at_ms')} = ${p.expiresAtMs}
        WHERE ${pk(p)} AND ${id('expires_at_ms')} <= ${p.nowMs}`,
    },
    // An in-flight record with a lapsed lease and the caller's fingerprint changes owner and lease only.
    takeOver: {
      id: 'reserve-take-over',
      build: (table, p) => sql`UPDATE ${id(table)} SET
        ${id('owner')} = ${p.owner}, ${id('lease_until_ms')} = ${p.leaseUntilMs}, ${id('updated_at_ms')} = ${p.nowMs}
        WHERE ${pk(p)} AND ${id('response_status')} IS NULL AND ${id('lease_until_ms')} <= ${p.nowMs}
          AND ${id('fingerprint')} = ${p.fingerprint} AND ${id('expires_at_ms')} > ${p.nowMs}
        RETURNING ${columnList}`,
    },
  };
}

/**
 * Reserve in steps, each one atomic, so that each step says what it did (a single upsert cannot tell a
 * takeover from a creation in the same millisecond):
 *
 * 1. `INSERT … ON CONFLICT DO NOTHING`: a fresh key is created in one statement, the common case.
 * 2. Otherwise read the record, without locking it: a completed or busy record (a replay, a duplicate in
 *    flight) is answered from this read.
 * 3. Only an expired record or a lapsed lease needs a write: an `UPDATE` whose `WHERE` re-checks, under the row
 *    lock, exactly what step 2 saw. Of concurrent callers one matches; the others find the row changed and
 *    start over (`retry`), then read the winner's record.
 */
export async function reserveInSteps(
  driver: Driver,
  shapes: ReserveShapes,
  db: unknown,
  table: string,
  params: ReserveParams,
): Promise<ReserveOutcome> {
  if ((await driver.run(db, table, shapes.insert, params)).affected === 1) return { kind: 'created' };
  const [row] = (await driver.run(db, table, loadShape, params)).rows;
  if (row === undefined) return { kind: 'retry' }; // released or purged since the insert met it
  switch (decideReservation(toRecord(row), params)) {
    case 'replace':
      return (await driver.run(db, table, shapes.replace, params)).affected === 1
        ? { kind: 'created' }
        : { kind: 'retry' };
    case 'take-over': {
      const [taken] = (await driver.run(db, table, shapes.takeOver, params)).rows;
      return taken === undefined ? { kind: 'retry' } : { kind: 'tookOver', row: taken };
    }
    default:
      return { kind: 'exists', row };
  }
}
