import { is, Placeholder, type SQL, sql } from 'drizzle-orm';
import { MySqlDialect } from 'drizzle-orm/mysql-core';
import { PgDialect } from 'drizzle-orm/pg-core';
import { SQLiteSyncDialect } from 'drizzle-orm/sqlite-core';
import type { DialectName } from './dialect-name.js';

/**
 * A statement whose text depends only on the table: its values are bound per call. A driver that can keep a
 * prepared statement renders it once per table, with placeholders, and then only binds values.
 */
export interface Shape<V> {
  readonly id: string;
  build(table: string, values: V): SQL;
}

/** A shaped statement rendered once: its text, and per parameter the value name to bind or a constant. */
export interface CompiledShape {
  readonly text: string;
  readonly bindings: readonly ({ readonly name: string } | { readonly constant: unknown })[];
}

// Each dialect's renderer: quoting and placeholders ($1 or ?) as its drivers expect them.
const renderers = {
  postgres: new PgDialect(),
  mysql: new MySqlDialect(),
  sqlite: new SQLiteSyncDialect(),
} satisfies Record<DialectName, { sqlToQuery(statement: SQL): { sql: string; params: unknown[] } }>;

// Any property read yields a placeholder of that name: builders take their values from it as from real ones.
const placeholders = new Proxy({}, { get: (_target, name) => sql.placeholder(String(name)) });

// The one cache of rendered statements: per dialect, shape and table, each looked up by identity (no key string
// is built per statement: this runs for every statement of every request).
const cache: Record<DialectName, Map<Shape<never>, Map<string, CompiledShape>>> = {
  postgres: new Map(),
  mysql: new Map(),
  sqlite: new Map(),
};

/** The text of a shape for one dialect and table, rendered once with placeholders where its values go. */
export function compile<V>(dialect: DialectName, shape: Shape<V>, table: string): CompiledShape {
  const byShape = cache[dialect];
  let byTable = byShape.get(shape as Shape<never>);
  if (byTable === undefined) {
    byTable = new Map();
    byShape.set(shape as Shape<never>, byTable);
  }
  let compiled = byTable.get(table);
  if (compiled === undefined) {
    const query = renderers[dialect].sqlToQuery(shape.build(table, placeholders as V));
    compiled = {
      text: query.sql,
      bindings: query.params.map((param) =>
        is(param, Placeholder) ? { name: param.name } : { constant: param },
      ),
    };
    byTable.set(table, compiled);
  }
  return compiled;
}

/** The parameter values of one call, in order. */
export function bind(compiled: CompiledShape, values: object): unknown[] {
  return compiled.bindings.map((b) =>
    'name' in b ? (values as Record<string, unknown>)[b.name] : b.constant,
  );
}
