import { decideReservation, type ReserveParams } from '@idem/core';
import { type SQL, sql } from 'drizzle-orm';
import type { MySqlDatabase } from 'drizzle-orm/mysql-core';
import { toRecord } from '../row.js';
import type { Shape } from '../statement-cache.js';
import { columnList, loadShape } from '../statements.js';
import type { Dialect, ReserveOutcome } from './dialect.js';

// biome-ignore lint/suspicious/noExplicitAny: any MySQL / MariaDB Drizzle database (mysql2).
export type MysqlDb = MySqlDatabase<any, any, any, any>;

const id = sql.identifier;

// What the upsert reports through the OK packet's insert id (see below). A fresh insert reports 0: the table
// has no AUTO_INCREMENT column.
const REPLACED = 2;
const TOOK_OVER = 3;
const EXISTS = 4;

/**
 * MySQL has neither ON CONFLICT … WHERE nor RETURNING (MariaDB's RETURNING costs a result set on every call),
 * so reserve is an INSERT … ON DUPLICATE KEY UPDATE whose every assignment is conditional, and which reports
 * what it did through LAST_INSERT_ID(expr): evaluated inside the statement, it becomes the insert id of the
 * OK packet, so no second round trip is needed to learn the outcome.
 *
 * MySQL applies the assignments left to right, each one seeing the columns already assigned. The decision is
 * taken once, in the first assignment: the owner becomes ours exactly when the record may be replaced or
 * taken over. Every later assignment asks "is the owner ours now?" (owner tokens are unique per attempt);
 * the two that depend on expiry come last, before `expires_at_ms` itself changes.
 */
function insertReservation(table: string, p: ReserveParams): SQL {
  return sql`INSERT INTO ${id(table)} (${columnList})
    VALUES (${p.scope}, ${p.key}, ${p.fingerprint}, ${p.owner}, ${p.leaseUntilMs}, NULL, NULL, NULL, FALSE,
      ${p.nowMs}, ${p.nowMs}, ${p.expiresAtMs})`;
}

/** MySQL's ER_DUP_ENTRY, wherever Drizzle put the driver's error. */
function isDuplicateKey(error: unknown): boolean {
  for (let e: unknown = error; typeof e === 'object' && e !== null; e = (e as { cause?: unknown }).cause) {
    if ((e as { code?: unknown }).code === 'ER_DUP_ENTRY') return true;
  }
  return false;
}

function upsertReserve(table: string, p: ReserveParams): SQL {
  const ours = sql`${id('owner')} <=> VALUES(${id('owner')})`;
  const expired = sql`${id('expires_at_ms')} <= ${p.nowMs}`;
  const keepUnlessOurs = (name: string, value: SQL) => sql`${id(name)} = IF(${ours}, ${value}, ${id(name)})`;
  const outcome = sql`LAST_INSERT_ID(IF(${ours}, IF(${expired}, ${REPLACED}, ${TOOK_OVER}), ${EXISTS}))`;
  return sql`${insertReservation(table, p)}
    ON DUPLICATE KEY UPDATE
      ${id('owner')} = IF(${expired}
        OR (${id('response_status')} IS NULL AND ${id('lease_until_ms')} <= ${p.nowMs}
          AND ${id('fingerprint')} = VALUES(${id('fingerprint')})),
        VALUES(${id('owner')}), ${id('owner')}),
      ${keepUnlessOurs('fingerprint', sql`VALUES(${id('fingerprint')})`)},
      ${keepUnlessOurs('lease_until_ms', sql`VALUES(${id('lease_until_ms')})`)},
      ${keepUnlessOurs('response_status', sql`NULL`)},
      ${keepUnlessOurs('response_headers', sql`NULL`)},
      ${keepUnlessOurs('response_body', sql`NULL`)},
      ${keepUnlessOurs('body_omitted', sql`FALSE`)},
      ${keepUnlessOurs('updated_at_ms', sql`VALUES(${id('updated_at_ms')})`)},
      ${id('created_at_ms')} = IF(${ours} AND ${expired}, VALUES(${id('created_at_ms')}), ${id('created_at_ms')}),
      ${id('expires_at_ms')} = IF(${outcome} = ${REPLACED}, VALUES(${id('expires_at_ms')}), ${id('expires_at_ms')})`;
}

const insertShape: Shape<ReserveParams> = { id: 'insert', build: insertReservation };
const upsertShape: Shape<ReserveParams> = { id: 'upsert', build: upsertReserve };

export const mysql: Dialect = {
  name: 'mysql',
  bool: (value) => value,
  // LONGBLOB: LENGTH counts bytes.
  byteLength: (column) => sql`LENGTH(${column})`,
  // MariaDB (10.11) plans a row-value comparison as a full scan of the primary key from its start, filtered
  // (EXPLAIN: type index, possible_keys NULL), and MySQL documents the same; the expanded form is a range scan.
  // The columns are VARBINARY: both compare bytes, as ORDER BY does.
  after: (ref) =>
    sql`(${id('scope')} > ${ref.scope} OR (${id('scope')} = ${ref.scope} AND ${id('idem_key')} > ${ref.key}))`,
  async reserve(driver, db, table, params): Promise<ReserveOutcome> {
    // A fresh key, the common case, is a plain INSERT: under concurrency InnoDB runs it markedly faster than
    // the upsert below (which takes next-key locks). A duplicate costs one read, and answers `exists` at
    // once when the record is clearly not ours to take; only an expired or lapsed record needs the upsert.
    try {
      await driver.run(db, table, insertShape, params);
      return { kind: 'created' };
    } catch (error) {
      if (!isDuplicateKey(error)) throw error;
    }
    const [row] = (await driver.run(db, table, loadShape, params)).rows;
    if (row !== undefined && decideReservation(toRecord(row), params) === 'keep')
      return { kind: 'exists', row };
    // The outcome comes back as the OK packet's insert id (see upsertReserve).
    const { insertId } = await driver.run(db, table, upsertShape, params);
    switch (insertId) {
      case 0:
      case REPLACED:
        return { kind: 'created' };
      case TOOK_OVER:
        return { kind: 'tookOver' };
      case EXISTS:
        return { kind: 'exists' };
      default:
        throw new Error(`unexpected reserve outcome ${insertId} from the server`);
    }
  },
  // Two steps, so that the purge locks rows in the order everything else does: by primary key, then the
  // expiry index. A DELETE … WHERE expires_at_ms < … LIMIT walks the expiry index first and took its locks
  // in the other order, deadlocking with a reserve that replaced an expired record it was deleting.
  async purge(driver, db, table, { beforeMs, limit }) {
    const picked = (
      await driver.execute(
        db,
        sql`SELECT ${id('scope')}, ${id('idem_key')} FROM ${id(table)}
          WHERE ${id('expires_at_ms')} < ${beforeMs} LIMIT ${limit}`,
        true,
      )
    ).rows;
    if (picked.length === 0) return 0;
    const refs = sql.join(
      picked.map((row) => sql`(${row.scope}, ${row.idem_key})`),
      sql`, `,
    );
    // The expiry is checked again: a record reserved afresh since the pick is not expired any more.
    const deleted = await driver.execute(
      db,
      sql`DELETE FROM ${id(table)} WHERE (${id('scope')}, ${id('idem_key')}) IN (${refs})
        AND ${id('expires_at_ms')} < ${beforeMs}`,
    );
    return deleted.affected;
  },
};
