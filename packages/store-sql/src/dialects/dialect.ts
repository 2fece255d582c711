import type { PurgeParams, RecordRef, ReserveParams } from '@idem/core';
import type { SQL } from 'drizzle-orm';
import type { DialectName } from '../dialect-name.js';
import type { Driver } from '../drivers/driver.js';
import type { RawRow } from '../row.js';

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

/** The grammar of one SQL dialect: how reserve decides, and how a batch of expired records is deleted. */
export interface Dialect {
  readonly name: DialectName;
  /** How a boolean is bound. */
  bool(value: boolean): unknown;
  /** Reserve through `driver`, in as few atomic statements as the dialect allows. */
  reserve(driver: Driver, db: unknown, table: string, params: ReserveParams): Promise<ReserveOutcome>;
  /** Delete at most `limit` records that expired before `beforeMs`; the count deleted. */
  purge(driver: Driver, db: unknown, table: string, params: PurgeParams): Promise<number>;
  /** The size in bytes of a binary column's value (NULL for NULL), without reading it out. */
  byteLength(column: SQL): SQL;
  /**
   * The rows after `ref` in (scope, idem_key) order, compared by the database in the columns' own collation (the
   * order `list` pages in), and written so that the planner starts a range scan of the primary key there.
   */
  after(ref: RecordRef): SQL;
}
