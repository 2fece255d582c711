import type { SQL } from 'drizzle-orm';
import type { RawRow } from '../row.js';
import type { Driver, StatementResult } from './driver.js';

const execute = async (db: unknown, statement: SQL): Promise<StatementResult> => {
  // postgres-js answers an array of rows that also carries the matched-row count.
  const rows = (await (db as { execute(s: SQL): Promise<unknown> }).execute(statement)) as RawRow[] & {
    count?: number | null;
  };
  return { rows: [...rows], affected: rows.count ?? 0 };
};

/**
 * postgres-js (`drizzle-orm/postgres-js`); statements go through Drizzle, and postgres-js prepares them itself
 * (its `prepare` option, on by default).
 */
export const postgresJs: Driver = {
  name: 'postgres-js',
  dialect: 'postgres',
  session: 'PostgresJsSession',
  run: (db, table, shape, values) => execute(db, shape.build(table, values)),
  execute,
};
