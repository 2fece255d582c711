import { drizzle } from 'drizzle-orm/node-postgres';
import pg from 'pg';
import type { CatalogDatabase } from './catalog-database.js';
import type { Tables } from './migrate.js';
import { CLIENT_MARGIN_MS, type DatabaseBounds } from './options.js';
import { pgConnections } from './pool.js';
import { pooledDatabase } from './pooled-database.js';

const ignore = () => {};

/**
 * The catalog on PostgreSQL (`postgres://…`, `postgresql://…`): a node-postgres pool, its sessions bounded.
 */
export function openPostgres(
  url: string,
  bounds: DatabaseBounds,
  tables: Tables = 'catalog',
): Promise<CatalogDatabase> {
  // Set once per connection, as startup parameters: no statement per transaction.
  const settings = [
    `lock_timeout=${bounds.lockTimeoutMs}`,
    `statement_timeout=${bounds.statementTimeoutMs}`,
    `idle_in_transaction_session_timeout=${bounds.idleTransactionTimeoutMs}`,
  ];
  const pool = new pg.Pool({
    connectionString: url,
    max: bounds.poolSize,
    options: settings.map((setting) => `-c ${setting}`).join(' '),
    connectionTimeoutMillis: bounds.acquireTimeoutMs,
    // Only a backstop (the startup's statements): every request's statement is bounded sooner, and its
    // connection destroyed when it runs out (database/deadline.ts).
    query_timeout: bounds.statementTimeoutMs + 2 * CLIENT_MARGIN_MS,
    keepAlive: true,
  });
  // node-postgres emits 'error' on a client whose connection breaks (reset, or ended by the server), and an
  // 'error' event nobody listens to ends the process. The pool listens on its idle clients only; a client
  // checked out (in a transaction) needs its own listener. The query in flight fails with the error itself
  // (a 503), and the pool drops the client when it comes back.
  pool.on('error', ignore);
  pool.on('connect', (client) => client.on('error', ignore));
  return pooledDatabase({
    dialect: 'postgres',
    db: drizzle(pool),
    acquire: pgConnections(pool, bounds.statementTimeoutMs),
    close: () => pool.end(),
    bounds,
    tables,
  });
}
