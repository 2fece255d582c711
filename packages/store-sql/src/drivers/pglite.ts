import type { SQL } from 'drizzle-orm';
import type { RawRow } from '../row.js';
import type { Driver, StatementResult } from './driver.js';

const execute = async (db: unknown, statement: SQL): Promise<StatementResult> => {
  const r = (await (db as { execute(s: SQL): Promise<unknown> }).execute(statement)) as {
    rows: RawRow[];
    affectedRows?: number;
  };
  return { rows: r.rows, affected: r.affectedRows ?? 0 };
};

/** PGlite (`drizzle-orm/pglite`): in-process PostgreSQL; statements go through Drizzle. */
export const pglite: Driver = {
  name: 'pglite',
  dialect: 'postgres',
  session: 'PgliteSession',
  run: (db, table, shape, values) => execute(db, shape.build(table, values)),
  execute,
};
