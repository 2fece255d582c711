import type { PurgeParams, ReserveParams } from '@idem/core';
import type { SQL } from 'drizzle-orm';
import type { RawRow } from '../row.js';
import type { Shape } from '../statements.js';

/**
 * What a dialect's reserve did: `created` (inserted, or replaced an expired record: the record is exactly
 * the caller's parameters), `tookOver` (the caller now owns a record whose lease lapsed), `exists` (nothing
 * changed), or `retry` (the record changed under it; the caller starts over). `row` is the record as it now
 * stands when the dialect has it.
 */
export type ReserveOutcome =
  | { readonly kind: 'created' }
  | { readonly kind: 'retry' }
  | { readonly kind: 'tookOver' | 'exists'; readonly row?: RawRow | undefined };

/** What differs between databases: how to run a statement, a few value encodings, reserve and purge. */
export interface Dialect<Db> {
  readonly name: 'postgres' | 'mysql' | 'sqlite';
  /** Run a statement that returns rows. */
  rows(db: Db, statement: SQL): Promise<RawRow[]>;
  /** Run a statement and return how many rows it matched. */
  affected(db: Db, statement: SQL): Promise<number>;
  /** Run a shaped statement that returns rows (a dialect may keep it prepared). */
  shapeRows<V>(db: Db, table: string, shape: Shape<V>, values: V): Promise<RawRow[]>;
  /** Run a shaped statement and return how many rows it matched. */
  shapeAffected<V>(db: Db, table: string, shape: Shape<V>, values: V): Promise<number>;
  /** How a boolean is bound. */
  bool(value: boolean): unknown;
  /** Run the single reserve statement and say what it did. */
  reserve(db: Db, table: string, params: ReserveParams): Promise<ReserveOutcome>;
  purge(db: Db, table: string, params: PurgeParams): Promise<number>;
}
