import { decideReservation, type PurgeParams, type ReserveParams } from '@idem/core';
import { type SQL, sql } from 'drizzle-orm';
import { type MySqlDatabase, MySqlDialect } from 'drizzle-orm/mysql-core';
import { bindShape, type CompiledShape, compileShape } from '../compiled.js';
import { type RawRow, toRecord } from '../row.js';
import { columnList, loadShape, type Shape } from '../statements.js';
import type { Dialect, ReserveOutcome } from './dialect.js';

// biome-ignore lint/suspicious/noExplicitAny: any mysql2 Drizzle database.
export type MySqlDb = MySqlDatabase<any, any, any, any>;

interface ResultHeader {
  affectedRows: number;
  insertId: number;
  info?: string;
}

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

/** mysql2's promise Pool, as Drizzle's `$client` exposes it. */
interface Mysql2Pool {
  execute(text: string, values: unknown[]): Promise<[unknown, unknown]>;
  getConnection: unknown;
}

const renderer = new MySqlDialect();
const compiledShapes = new Map<string, CompiledShape>();

/**
 * On a mysql2 pool, shaped statements run through `execute`: a server-side prepared statement per connection,
 * parsed once, and not re-rendered by Drizzle. Transactions go through Drizzle.
 */
async function onPool<V>(db: MySqlDb, table: string, shape: Shape<V>, values: V): Promise<unknown> {
  const pool = (db as { $client?: Partial<Mysql2Pool> }).$client;
  if (typeof pool?.execute !== 'function' || pool.getConnection === undefined) {
    return ((await db.execute(shape.build(table, values))) as unknown as [unknown])[0];
  }
  const id = `${table}\u0000${shape.id}`;
  let compiled = compiledShapes.get(id);
  if (compiled === undefined) {
    compiled = compileShape(renderer, shape, table);
    compiledShapes.set(id, compiled);
  }
  return (await (pool as Mysql2Pool).execute(compiled.text, bindShape(compiled, values as object)))[0];
}

function matchedRows(header: ResultHeader): number {
  // With the FOUND_ROWS client flag off, an UPDATE that leaves a row as it was counts 0; the server's
  // "Rows matched" is what the fence needs either way.
  const matched = header.info === undefined ? undefined : /Rows matched: (\d+)/.exec(header.info)?.[1];
  return matched === undefined ? header.affectedRows : Number(matched);
}

const insertShape: Shape<ReserveParams> = { id: 'insert', build: insertReservation };
const upsertShape: Shape<ReserveParams> = { id: 'upsert', build: upsertReserve };

export const mysql: Dialect<MySqlDb> = {
  name: 'mysql',
  async rows(db, statement) {
    const [rows] = (await db.execute(statement)) as unknown as [RawRow[]];
    return rows;
  },
  async affected(db, statement) {
    const [header] = (await db.execute(statement)) as unknown as [ResultHeader];
    return matchedRows(header);
  },
  async shapeRows(db, table, shape, values) {
    return (await onPool(db, table, shape, values)) as RawRow[];
  },
  async shapeAffected(db, table, shape, values) {
    return matchedRows((await onPool(db, table, shape, values)) as ResultHeader);
  },
  bool: (value) => value,
  async reserve(db, table, params): Promise<ReserveOutcome> {
    // A fresh key, the common case, is a plain INSERT: under concurrency InnoDB runs it markedly faster than
    // the upsert below (which takes next-key locks). A duplicate costs one read, and answers `exists` at
    // once when the record is clearly not ours to take; only an expired or lapsed record needs the upsert.
    try {
      await onPool(db, table, insertShape, params);
      return { kind: 'created' };
    } catch (error) {
      if (!isDuplicateKey(error)) throw error;
    }
    const [row] = await this.shapeRows(db, table, loadShape, params);
    if (row !== undefined && decideReservation(toRecord(row), params) === 'keep')
      return { kind: 'exists', row };
    const header = (await onPool(db, table, upsertShape, params)) as ResultHeader;
    switch (header.insertId) {
      case 0:
      case REPLACED:
        return { kind: 'created' };
      case TOOK_OVER:
        return { kind: 'tookOver' };
      case EXISTS:
        return { kind: 'exists' };
      default:
        throw new Error(`unexpected reserve outcome ${header.insertId} from the server`);
    }
  },
  async purge(db, table, { beforeMs, limit }: PurgeParams) {
    return this.affected(
      db,
      sql`DELETE FROM ${id(table)} WHERE ${id('expires_at_ms')} < ${beforeMs} LIMIT ${limit}`,
    );
  },
};
