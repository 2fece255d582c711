import type { PurgeParams, ReserveParams } from '@idem/core';
import type { SQL } from 'drizzle-orm';
import type { RawRow } from '../row.js';

/** What differs between databases: how to run a statement, a few value encodings, reserve and purge. */
export interface Dialect<Db> {
  readonly name: 'postgres' | 'mysql' | 'sqlite';
  /** Run a statement that returns rows. */
  rows(db: Db, statement: SQL): Promise<RawRow[]>;
  /** Run a statement and return how many rows it matched. */
  affected(db: Db, statement: SQL): Promise<number>;
  /** How a boolean is bound. */
  bool(value: boolean): unknown;
  /** Run the single reserve statement; the row it leaves when the caller now owns the record, else undefined. */
  reserve(db: Db, table: string, params: ReserveParams): Promise<RawRow | undefined>;
  purge(db: Db, table: string, params: PurgeParams): Promise<number>;
}
