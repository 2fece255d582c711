import { createHash } from 'node:crypto';
import type { PurgeParams, ReserveParams } from '@idem/core';
import { type SQL, sql } from 'drizzle-orm';
import { type PgDatabase, PgDialect } from 'drizzle-orm/pg-core';
import { bindShape, type CompiledShape, compileShape } from '../compiled.js';
import type { RawRow } from '../row.js';
import { columnList, type Shape } from '../statements.js';
import type { Dialect, ReserveOutcome } from './dialect.js';

// biome-ignore lint/suspicious/noExplicitAny: any node-postgres, PGlite or other PostgreSQL Drizzle database.
export type PgDb = PgDatabase<any, any, any>;

/** node-postgres reports `rowCount`; PGlite reports `affectedRows`. */
interface PgResult {
  rows: RawRow[];
  rowCount?: number | null;
  affectedRows?: number;
}

const id = sql.identifier;

/** The one upsert that decides every case of reserve, shared with SQLite (same ON CONFLICT grammar). */
export function upsertReserve(table: string, p: ReserveParams, bool: (value: boolean) => unknown): SQL {
  const expired = sql`${id('cur')}.${id('expires_at_ms')} <= ${p.nowMs}`;
  return sql`INSERT INTO ${id(table)} AS ${id('cur')} (${columnList})
    VALUES (${p.scope}, ${p.key}, ${p.fingerprint}, ${p.owner}, ${p.leaseUntilMs}, NULL, NULL, NULL, ${bool(false)},
      ${p.nowMs}, ${p.nowMs}, ${p.expiresAtMs})
    ON CONFLICT (${id('scope')}, ${id('idem_key')}) DO UPDATE SET
      ${id('fingerprint')} = excluded.${id('fingerprint')},
      ${id('owner')} = excluded.${id('owner')},
      ${id('lease_until_ms')} = excluded.${id('lease_until_ms')},
      ${id('response_status')} = NULL,
      ${id('response_headers')} = NULL,
      ${id('response_body')} = NULL,
      ${id('body_omitted')} = excluded.${id('body_omitted')},
      ${id('created_at_ms')} = CASE WHEN ${expired} THEN excluded.${id('created_at_ms')} ELSE ${id('cur')}.${id('created_at_ms')} END,
      ${id('expires_at_ms')} = CASE WHEN ${expired} THEN excluded.${id('expires_at_ms')} ELSE ${id('cur')}.${id('expires_at_ms')} END,
      ${id('updated_at_ms')} = excluded.${id('updated_at_ms')}
    WHERE ${expired}
      OR (${id('cur')}.${id('response_status')} IS NULL
        AND ${id('cur')}.${id('lease_until_ms')} <= ${p.nowMs}
        AND ${id('cur')}.${id('fingerprint')} = excluded.${id('fingerprint')})
    RETURNING ${columnList}`;
}

/**
 * Read what the upsert did from the row it returned: none when the record stayed as it was; a new or replaced
 * record starts now, while a taken-over one keeps its creation time, which is earlier (the lease it held
 * began at creation and has run out).
 */
export function outcomeOf(row: RawRow | undefined, params: ReserveParams): ReserveOutcome {
  if (row === undefined) return { kind: 'exists' };
  return Number(row.created_at_ms) === params.nowMs ? { kind: 'created' } : { kind: 'tookOver', row };
}

/** node-postgres' Pool, as Drizzle's `$client` exposes it. */
interface NodePgPool {
  query(config: { name: string; text: string; values: unknown[] }): Promise<PgResult>;
  totalCount: number;
}

const renderer = new PgDialect();
const compiledShapes = new Map<string, CompiledShape & { name: string }>();

/**
 * On a node-postgres pool, shaped statements run as named prepared statements: each connection parses and
 * plans the (long) reserve upsert once instead of on every call, and Drizzle does not re-render it. The name
 * is derived from the text, so one name always means one text. Transactions and PGlite go through Drizzle.
 */
function onPool<V>(db: PgDb, table: string, shape: Shape<V>, values: V): Promise<PgResult> | undefined {
  const pool = (db as { $client?: Partial<NodePgPool> }).$client;
  if (typeof pool?.query !== 'function' || typeof pool.totalCount !== 'number') return undefined;
  const id = `${table}\u0000${shape.id}`;
  let compiled = compiledShapes.get(id);
  if (compiled === undefined) {
    const rendered = compileShape(renderer, shape, table);
    const name = `idem_${createHash('sha1').update(rendered.text).digest('hex').slice(0, 16)}`;
    compiled = { ...rendered, name };
    compiledShapes.set(id, compiled);
  }
  return (pool as NodePgPool).query({
    name: compiled.name,
    text: compiled.text,
    values: bindShape(compiled, values as object),
  });
}

const reserveShape: Shape<ReserveParams> = {
  id: 'reserve',
  build: (table, params) => upsertReserve(table, params, (value) => value),
};

export const postgres: Dialect<PgDb> = {
  name: 'postgres',
  async rows(db, statement) {
    return ((await db.execute(statement)) as unknown as PgResult).rows;
  },
  async affected(db, statement) {
    const result = (await db.execute(statement)) as unknown as PgResult;
    return result.rowCount ?? result.affectedRows ?? 0;
  },
  async shapeRows(db, table, shape, values) {
    const direct = onPool(db, table, shape, values);
    return direct === undefined ? this.rows(db, shape.build(table, values)) : (await direct).rows;
  },
  async shapeAffected(db, table, shape, values) {
    const direct = onPool(db, table, shape, values);
    return direct === undefined
      ? this.affected(db, shape.build(table, values))
      : ((await direct).rowCount ?? 0);
  },
  bool: (value) => value,
  async reserve(db, table, params) {
    // One statement, atomic under any concurrency: the insert wins outright, or the conflicting row is
    // locked and the WHERE re-checked against its latest version (replace if expired, take over if the
    // lease lapsed with the same fingerprint). No row comes back when the record stays as it is.
    return outcomeOf((await this.shapeRows(db, table, reserveShape, params))[0], params);
  },
  async purge(db, table, { beforeMs, limit }: PurgeParams) {
    // A bounded batch picked by primary key; SKIP LOCKED lets purgers on many nodes share the work
    // without waiting on each other's rows.
    return this.affected(
      db,
      sql`DELETE FROM ${id(table)} WHERE (${id('scope')}, ${id('idem_key')}) IN (
        SELECT ${id('scope')}, ${id('idem_key')} FROM ${id(table)}
        WHERE ${id('expires_at_ms')} < ${beforeMs} LIMIT ${limit} FOR UPDATE SKIP LOCKED)`,
    );
  },
};
