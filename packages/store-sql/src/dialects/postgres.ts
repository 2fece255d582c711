import { createHash } from 'node:crypto';
import type { PurgeParams } from '@idem/core';
import { sql } from 'drizzle-orm';
import { type PgDatabase, PgDialect } from 'drizzle-orm/pg-core';
import { bindShape, type CompiledShape, compileShape } from '../compiled.js';
import type { RawRow } from '../row.js';
import type { Shape } from '../statements.js';
import type { Dialect } from './dialect.js';
import { reserveInSteps, reserveShapes } from './reserve-steps.js';

// biome-ignore lint/suspicious/noExplicitAny: any node-postgres, PGlite or other PostgreSQL Drizzle database.
export type PgDb = PgDatabase<any, any, any>;

/** node-postgres reports `rowCount`; PGlite reports `affectedRows`. */
interface PgResult {
  rows: RawRow[];
  rowCount?: number | null;
  affectedRows?: number;
}

const id = sql.identifier;

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

const shapes = reserveShapes((value) => value);

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
  reserve(db, table, params) {
    return reserveInSteps(this, shapes, db, table, params);
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
