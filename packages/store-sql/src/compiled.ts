import { is, Placeholder, sql } from 'drizzle-orm';
import type { Shape } from './statements.js';

/** A shaped statement rendered once: its text, and per parameter the value name to bind or a constant. */
export interface CompiledShape {
  readonly text: string;
  readonly bindings: readonly ({ readonly name: string } | { readonly constant: unknown })[];
}

interface Renderer {
  sqlToQuery(statement: ReturnType<typeof sql>): { sql: string; params: unknown[] };
}

// Any property read yields a placeholder of that name: builders take their values from it as from real ones.
const placeholders = new Proxy({}, { get: (_target, name) => sql.placeholder(String(name)) });

/** Render a shape for one table with placeholders where its values go. */
export function compileShape<V>(renderer: Renderer, shape: Shape<V>, table: string): CompiledShape {
  const query = renderer.sqlToQuery(shape.build(table, placeholders as V));
  return {
    text: query.sql,
    bindings: query.params.map((param) =>
      is(param, Placeholder) ? { name: param.name } : { constant: param },
    ),
  };
}

/** The parameter values of one call, in order. */
export function bindShape(compiled: CompiledShape, values: object): unknown[] {
  return compiled.bindings.map((b) =>
    'name' in b ? (values as Record<string, unknown>)[b.name] : b.constant,
  );
}
