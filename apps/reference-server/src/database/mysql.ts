import { drizzle } from 'drizzle-orm/mysql2';
import mysql from 'mysql2/promise';
import type { CatalogDatabase } from './catalog-database.js';
import type { Tables } from './migrate.js';
import type { DatabaseBounds } from './options.js';
import { mysqlConnections } from './pool.js';
import { pooledDatabase } from './pooled-database.js';

const ignore = () => {};
const wholeSeconds = (ms: number) => Math.max(1, Math.ceil(ms / 1_000));

/** The catalog on MySQL or MariaDB (`mysql://…`): a mysql2 pool, each session bounded as it opens. */
export function openMysql(
  url: string,
  bounds: DatabaseBounds,
  tables: Tables = 'catalog',
): Promise<CatalogDatabase> {
  const pool = mysql.createPool({
    uri: url,
    connectionLimit: bounds.poolSize,
    connectTimeout: bounds.acquireTimeoutMs,
    enableKeepAlive: true,
  });
  // Set on each connection as the pool opens it, before its first statement. InnoDB counts lock waits in
  // whole seconds; max_statement_time and idle_transaction_timeout are MariaDB's (MySQL refuses them: the
  // client-side bounds still hold there).
  pool.pool.on('connection', (connection) => {
    connection.on('error', ignore); // a connection that breaks while idle: the pool drops it
    connection.query(`SET SESSION innodb_lock_wait_timeout = ${wholeSeconds(bounds.lockTimeoutMs)}`, ignore);
    connection.query(`SET SESSION max_statement_time = ${bounds.statementTimeoutMs / 1_000}`, ignore);
    connection.query(
      `SET SESSION idle_transaction_timeout = ${wholeSeconds(bounds.idleTransactionTimeoutMs)}`,
      ignore,
    );
  });
  return pooledDatabase({
    dialect: 'mysql',
    db: drizzle(pool),
    acquire: mysqlConnections(pool, bounds.statementTimeoutMs),
    close: () => pool.end(),
    bounds,
    tables,
  });
}
