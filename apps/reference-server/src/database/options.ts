import type { ServerConfig } from '../config.js';

/** How long the database's calls may take; every one is bounded (see the README's settings table). */
export interface DatabaseOptions {
  /**
   * The longest a statement waits for a row lock, in ms: a request that waits behind another with its key
   * (on the idempotency record's row) answers a retryable 503 after this. @default 5_000
   */
  readonly lockTimeoutMs?: number;
  /** The longest one statement runs, in ms (server side, and client side a little later). @default 10_000 */
  readonly statementTimeoutMs?: number;
  /** The longest a transaction waits for a connection, opening one included, in ms. @default 5_000 */
  readonly acquireTimeoutMs?: number;
  /**
   * How long the database keeps an open transaction whose client has gone silent before it ends the session,
   * in ms (PostgreSQL `idle_in_transaction_session_timeout`, MariaDB `idle_transaction_timeout`, whole seconds):
   * a stalled node's reservation and row locks last that long. @default 10_000
   */
  readonly idleTransactionTimeoutMs?: number;
  /** The most connections open to a PostgreSQL or MySQL database. @default 10 */
  readonly poolSize?: number;
}

/** Database options with every default filled in, resolved once (see {@link databaseBounds}). */
export type DatabaseBounds = Required<DatabaseOptions>;

/** The options with their defaults. */
export const databaseBounds = (options: DatabaseOptions): DatabaseBounds => ({
  lockTimeoutMs: options.lockTimeoutMs ?? 5_000,
  statementTimeoutMs: options.statementTimeoutMs ?? 10_000,
  acquireTimeoutMs: options.acquireTimeoutMs ?? 5_000,
  idleTransactionTimeoutMs: options.idleTransactionTimeoutMs ?? 10_000,
  poolSize: options.poolSize ?? 10,
});

/** The database options of a server's settings. */
export const databaseOptions = (config: ServerConfig): DatabaseOptions => ({
  lockTimeoutMs: config.idempotency.maxWaitMs,
  statementTimeoutMs: config.database.statementTimeoutMs,
  acquireTimeoutMs: config.database.acquireTimeoutMs,
  idleTransactionTimeoutMs: config.database.idleTransactionTimeoutMs,
  poolSize: config.database.poolSize,
});

/** How much later than the database's statement timeout the client gives up on a statement. */
export const CLIENT_MARGIN_MS = 1_000;
