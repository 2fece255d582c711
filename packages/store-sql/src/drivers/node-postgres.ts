import { createHash } from 'node:crypto';
import type { SQL } from 'drizzle-orm';
import type { RawRow } from '../row.js';
import { bind, compile, type Shape } from '../statement-cache.js';
import type { Driver, StatementResult } from './driver.js';

interface QueryResult {
  rows: RawRow[];
  rowCount: number | null;
}

/** A node-postgres Pool or Client, as Drizzle keeps it on `$client`. */
interface PgClient {
  query(config: { name: string; text: string; values: unknown[] }): Promise<QueryResult>;
}

const result = (r: QueryResult): StatementResult => ({ rows: r.rows, affected: r.rowCount ?? 0 });

// One name per text: each connection parses and plans a statement (the long reserve upsert above all) once.
const names = new Map<string, string>();
const nameOf = (text: string): string => {
  let name = names.get(text);
  if (name === undefined) {
    name = `idem_${createHash('sha1').update(text).digest('hex').slice(0, 16)}`;
    names.set(text, name);
  }
  return name;
};

const execute = async (db: unknown, statement: SQL): Promise<StatementResult> =>
  result((await (db as { execute(s: SQL): Promise<unknown> }).execute(statement)) as QueryResult);

/**
 * node-postgres (`drizzle-orm/node-postgres`). On the database itself, shaped statements run as named
 * prepared statements; inside a transaction they go through Drizzle, on the transaction's connection.
 */
export const nodePostgres: Driver = {
  name: 'node-postgres',
  dialect: 'postgres',
  session: 'NodePgSession',
  async run(db, table, shape, values) {
    const client = (db as { $client?: PgClient }).$client;
    if (client === undefined) return execute(db, shape.build(table, values));
    const compiled = compile('postgres', shape as Shape<unknown>, table);
    return result(
      await client.query({
        name: nameOf(compiled.text),
        text: compiled.text,
        values: bind(compiled, values as object),
      }),
    );
  },
  execute,
};
