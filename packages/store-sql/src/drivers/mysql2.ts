import type { SQL } from 'drizzle-orm';
import type { RawRow } from '../row.js';
import { bind, compile, type Shape } from '../statement-cache.js';
import type { Driver, StatementResult } from './driver.js';

/** What mysql2 answers a write with. */
interface ResultHeader {
  affectedRows: number;
  insertId: number;
  info?: string;
}

/** mysql2's promise Pool (or Connection), as Drizzle keeps it on `$client`. */
interface Mysql2Client {
  execute(text: string, values: unknown[]): Promise<[unknown, unknown]>;
}

/**
 * Rows for a query, the matched rows for a write. With the FOUND_ROWS client flag off, an UPDATE that leaves a
 * row as it was counts 0 affected; the server's "Rows matched" is what a fence needs either way.
 */
export function mysqlResult(first: unknown): StatementResult {
  if (Array.isArray(first)) return { rows: first as RawRow[], affected: first.length };
  const header = first as ResultHeader;
  const matched = header.info === undefined ? undefined : /Rows matched: (\d+)/.exec(header.info)?.[1];
  return {
    rows: [],
    affected: matched === undefined ? header.affectedRows : Number(matched),
    insertId: header.insertId,
  };
}

const execute = async (db: unknown, statement: SQL) =>
  mysqlResult(((await (db as { execute(s: SQL): Promise<unknown> }).execute(statement)) as [unknown])[0]);

/**
 * mysql2 (`drizzle-orm/mysql2`). On the database itself, shaped statements run through `execute`: a
 * server-side prepared statement per connection, parsed once. Inside a transaction they go through Drizzle.
 */
export const mysql2: Driver = {
  name: 'mysql2',
  dialect: 'mysql',
  session: 'MySql2Session',
  async run(db, table, shape, values) {
    const client = (db as { $client?: Mysql2Client }).$client;
    if (client === undefined) return execute(db, shape.build(table, values));
    const compiled = compile('mysql', shape as Shape<unknown>, table);
    return mysqlResult((await client.execute(compiled.text, bind(compiled, values as object)))[0]);
  },
  execute,
};
