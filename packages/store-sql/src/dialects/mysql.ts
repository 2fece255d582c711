import type { PurgeParams, ReserveParams } from '@idem/core';
import { type SQL, sql } from 'drizzle-orm';
import type { MySqlDatabase } from 'drizzle-orm/mysql-core';
import type { RawRow } from '../row.js';
import { columnList, loadStatement } from '../statements.js';
import type { Dialect } from './dialect.js';

// biome-ignore lint/suspicious/noExplicitAny: any mysql2 Drizzle database.
export type MySqlDb = MySqlDatabase<any, any, any, any>;

interface ResultHeader {
  affectedRows: number;
  info?: string;
}

const id = sql.identifier;
const col = (name: string) => id(name);

/**
 * MySQL has no ON CONFLICT … WHERE and no RETURNING, so reserve is an INSERT … ON DUPLICATE KEY UPDATE
 * whose every assignment is conditional. MySQL applies the assignments left to right, each one seeing the
 * columns already assigned, so the decision is taken once, in the first assignment: the owner becomes ours
 * exactly when the record may be replaced or taken over. Every later assignment asks "is the owner ours
 * now?" (owner tokens are unique per attempt), and the two that depend on expiry come last, before
 * `expires_at_ms` itself changes.
 */
function upsertReserve(table: string, p: ReserveParams): SQL {
  const ours = sql`${col('owner')} <=> VALUES(${col('owner')})`;
  const expired = sql`${col('expires_at_ms')} <= ${p.nowMs}`;
  const keepUnlessOurs = (name: string, value: SQL) =>
    sql`${col(name)} = IF(${ours}, ${value}, ${col(name)})`;
  return sql`INSERT INTO ${id(table)} (${columnList})
    VALUES (${p.scope}, ${p.key}, ${p.fingerprint}, ${p.owner}, ${p.leaseUntilMs}, NULL, NULL, NULL, FALSE,
      ${p.nowMs}, ${p.nowMs}, ${p.expiresAtMs})
    ON DUPLICATE KEY UPDATE
      ${col('owner')} = IF(${expired}
        OR (${col('response_status')} IS NULL AND ${col('lease_until_ms')} <= ${p.nowMs}
          AND ${col('fingerprint')} = VALUES(${col('fingerprint')})),
        VALUES(${col('owner')}), ${col('owner')}),
      ${keepUnlessOurs('fingerprint', sql`VALUES(${col('fingerprint')})`)},
      ${keepUnlessOurs('lease_until_ms', sql`VALUES(${col('lease_until_ms')})`)},
      ${keepUnlessOurs('response_status', sql`NULL`)},
      ${keepUnlessOurs('response_headers', sql`NULL`)},
      ${keepUnlessOurs('response_body', sql`NULL`)},
      ${keepUnlessOurs('body_omitted', sql`FALSE`)},
      ${keepUnlessOurs('updated_at_ms', sql`VALUES(${col('updated_at_ms')})`)},
      ${col('created_at_ms')} = IF(${ours} AND ${expired}, VALUES(${col('created_at_ms')}), ${col('created_at_ms')}),
      ${col('expires_at_ms')} = IF(${ours} AND ${expired}, VALUES(${col('expires_at_ms')}), ${col('expires_at_ms')})`;
}

/** `true` when the server is MariaDB 10.5 or later, which can return the row with INSERT … RETURNING. */
async function supportsReturning(db: MySqlDb): Promise<boolean> {
  const [rows] = (await db.execute(sql`SELECT VERSION() AS v`)) as unknown as [RawRow[]];
  const version = String(rows[0]?.v ?? '');
  const match = /^(\d+)\.(\d+).*mariadb/i.exec(version);
  return match !== null && (Number(match[1]) > 10 || (Number(match[1]) === 10 && Number(match[2]) >= 5));
}

export interface MySqlDialectOptions {
  /** Use INSERT … RETURNING (MariaDB ≥ 10.5); detected from the server version when undefined. */
  readonly returning?: boolean | undefined;
}

export function mysqlDialect(options: MySqlDialectOptions = {}): Dialect<MySqlDb> {
  let returning: Promise<boolean> | undefined =
    options.returning === undefined ? undefined : Promise.resolve(options.returning);
  return {
    name: 'mysql',
    async rows(db, statement) {
      const [rows] = (await db.execute(statement)) as unknown as [RawRow[]];
      return rows;
    },
    async affected(db, statement) {
      const [header] = (await db.execute(statement)) as unknown as [ResultHeader];
      // With the FOUND_ROWS client flag off, an UPDATE that leaves a row as it was counts 0; the server's
      // "Rows matched" is what the fence needs either way.
      const matched = header.info === undefined ? undefined : /Rows matched: (\d+)/.exec(header.info)?.[1];
      return matched === undefined ? header.affectedRows : Number(matched);
    },
    bool: (value) => value,
    async reserve(db, table, params) {
      returning ??= supportsReturning(db).catch((error: unknown) => {
        returning = undefined; // a failed probe is retried on the next call
        throw error;
      });
      const statement = upsertReserve(table, params);
      let row: RawRow | undefined;
      if (await returning) {
        [row] = await this.rows(db, sql`${statement} RETURNING ${columnList}`);
      } else {
        // MySQL: one more read. The owner check below keeps it correct even if the row changed in between.
        await db.execute(statement);
        [row] = await this.rows(db, loadStatement(table, params));
      }
      // VARBINARY columns come back as Buffers.
      return row !== undefined && row.owner !== null && String(row.owner) === params.owner ? row : undefined;
    },
    async purge(db, table, { beforeMs, limit }: PurgeParams) {
      return this.affected(
        db,
        sql`DELETE FROM ${id(table)} WHERE ${col('expires_at_ms')} < ${beforeMs} LIMIT ${limit}`,
      );
    },
  };
}
