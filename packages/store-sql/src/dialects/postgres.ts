import { sql } from 'drizzle-orm';
import type { PgDatabase } from 'drizzle-orm/pg-core';
import type { Dialect } from './dialect.js';
import { afterByRowValue, reserveInSteps, reserveShapes } from './on-conflict.js';

// biome-ignore lint/suspicious/noExplicitAny: any PostgreSQL Drizzle database (node-postgres, PGlite, postgres-js).
export type PostgresDb = PgDatabase<any, any, any>;

const shapes = reserveShapes((value) => value);
const id = sql.identifier;

export const postgres: Dialect = {
  name: 'postgres',
  bool: (value) => value,
  reserve: (driver, db, table, params) => reserveInSteps(driver, shapes, db, table, params),
  // bytea's size is in its header: a TOASTed body is not fetched to measure it.
  byteLength: (column) => sql`octet_length(${column})`,
  after: afterByRowValue,
  // A bounded batch picked by primary key; SKIP LOCKED lets purgers on many nodes share the work without
  // waiting on each other's rows.
  purge: async (driver, db, table, { beforeMs, limit }) =>
    (
      await driver.execute(
        db,
        sql`DELETE FROM ${id(table)} WHERE (${id('scope')}, ${id('idem_key')}) IN (
      SELECT ${id('scope')}, ${id('idem_key')} FROM ${id(table)}
      WHERE ${id('expires_at_ms')} < ${beforeMs} LIMIT ${limit} FOR UPDATE SKIP LOCKED)`,
      )
    ).affected,
};
