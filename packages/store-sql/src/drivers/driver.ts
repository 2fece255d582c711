import { entityKind, type SQL } from 'drizzle-orm';
import type { DialectName } from '../dialect-name.js';
import type { RawRow } from '../row.js';
import type { Shape } from '../statement-cache.js';

/** What a statement returned: its rows (none for most writes) and how many rows it matched. */
export interface StatementResult {
  readonly rows: RawRow[];
  readonly affected: number;
  /** MySQL's OK packet insert id, which the reserve upsert uses to report its outcome. */
  readonly insertId?: number;
}

/**
 * How statements run on one client library (node-postgres, PGlite, postgres-js, mysql2, better-sqlite3),
 * whatever their SQL: the dialects hold the grammar, drivers only execute it and read the results.
 */
export interface Driver {
  /** The client library, as users know it. */
  readonly name: string;
  readonly dialect: DialectName;
  /** The Drizzle session kind (`entityKind`) of this library's databases and transactions. */
  readonly session: string;
  /** Run a shaped statement: prepared once per connection where the client allows it, else through Drizzle. */
  run<V>(db: unknown, table: string, shape: Shape<V>, values: V): Promise<StatementResult>;
  /**
   * Run any statement through Drizzle. `reads`: the statement returns rows (a SELECT, or RETURNING), which
   * SQLite's clients must know beforehand; the others ignore it.
   */
  execute(db: unknown, statement: SQL, reads?: boolean): Promise<StatementResult>;
  /** The same, synchronously, for a client whose transactions are synchronous (better-sqlite3). */
  runSync?<V>(db: unknown, table: string, shape: Shape<V>, values: V): StatementResult;
}

/** The Drizzle session kind of a database or transaction object, if it is one. */
function sessionKind(db: unknown): string | undefined {
  const session = (db as { session?: { constructor?: Record<symbol, unknown> } } | null)?.session;
  const kind = session?.constructor?.[entityKind];
  return typeof kind === 'string' ? kind : undefined;
}

/**
 * The driver of a Drizzle database or transaction, recognised by the session class Drizzle built it with (its
 * `entityKind`), never guessed from the shape of the object. An unknown one is refused with the list of
 * supported drivers.
 */
export function recognise(db: unknown, drivers: readonly Driver[]): Driver {
  const kind = sessionKind(db);
  const driver = drivers.find((d) => d.session === kind);
  if (driver === undefined) {
    const supported = drivers.map((d) => `${d.name} (drizzle-orm/${d.name})`).join(', ');
    throw new TypeError(
      `@idem/store-sql does not support this database${kind === undefined ? '' : ` (a Drizzle ${kind})`}: ` +
        `supported drivers are ${supported}`,
    );
  }
  return driver;
}
