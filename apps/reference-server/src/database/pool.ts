import type { IdempotencyStore, TransactionalStore } from '@idem/core';
import { createSqlStore, type SupportedDb } from '@idem/store-sql';
import { drizzle as mysqlDrizzle } from 'drizzle-orm/mysql2';
import { drizzle as pgDrizzle } from 'drizzle-orm/node-postgres';
import type mysql from 'mysql2/promise';
import type pg from 'pg';
import type { PooledConnection } from './deadline.js';
import { executorOn } from './executor.js';

/** What a checked-out connection runs on: Drizzle and the idempotency store over that one connection. */
interface OnConnection {
  readonly db: SupportedDb;
  readonly store: IdempotencyStore & { inTransaction(tx: never): TransactionalStore };
}

/**
 * A connection checked out of the catalog's pool: each request's statements run on a connection it holds, so
 * that one given up on can be destroyed instead of going back to the pool with its answer still on its way.
 */
export interface CatalogConnection extends PooledConnection {
  /** Drizzle on this connection alone (the schema is made on it at open). */
  readonly db: SupportedDb;
  /** The idempotency store on this connection, for its calls outside a transaction. */
  readonly store: IdempotencyStore;
}

const storeOf = (db: SupportedDb, dialect: 'postgres' | 'mysql') =>
  (dialect === 'postgres'
    ? createSqlStore(db as never, { dialect })
    : createSqlStore(db as never, { dialect })) as unknown as OnConnection['store'];

/**
 * node-postgres. `statementTimeoutMs` is the session's `statement_timeout` (a startup parameter): a transaction
 * whose time left is shorter sets its own with `SET LOCAL`, in the same round trip as its BEGIN.
 */
export function pgConnections(pool: pg.Pool, statementTimeoutMs: number): () => Promise<CatalogConnection> {
  const cache = new WeakMap<pg.PoolClient, OnConnection>();
  return async () => {
    const client = await pool.connect();
    let on = cache.get(client);
    if (on === undefined) {
      const db = pgDrizzle(client);
      on = { db, store: storeOf(db, 'postgres') };
      cache.set(client, on);
    }
    return {
      executor: executorOn(on.db, on.store.inTransaction(on.db as never), 'postgres'),
      db: on.db,
      store: on.store,
      // A statement outside a transaction (a read) keeps the session's bound: the client still gives up on it,
      // and closes its connection, once the time left has passed; the server ends it by statement_timeout.
      prepare: async () => {},
      begin: async (serverMs) => {
        await client.query(
          serverMs < statementTimeoutMs ? `BEGIN; SET LOCAL statement_timeout = ${serverMs}` : 'BEGIN',
        );
      },
      commit: async () => void (await client.query('COMMIT')),
      rollback: async () => void (await client.query('ROLLBACK')),
      release: () => client.release(),
      // Removed from the pool and its socket destroyed (node-postgres ends a client with a query in flight so).
      destroy: () => client.release(true),
    };
  };
}

// MariaDB's max_statement_time, as a session runs with it now (set at connect to the configured bound).
const sessionBound = new WeakMap<object, number>();

/** A server bound in steps of 100 ms (at least 1 ms), so that transactions with about the same time left share it. */
const step = (ms: number) => (ms >= 200 ? Math.floor(ms / 100) * 100 : Math.max(1, Math.floor(ms)));

/**
 * mysql2. `statementTimeoutMs` is the session's `max_statement_time` (MariaDB; set as each connection opens): a
 * transaction whose time left is shorter lowers it first, and a later one raises it again. MySQL refuses the
 * variable: there the client-side bounds hold alone.
 */
export function mysqlConnections(
  pool: mysql.Pool,
  statementTimeoutMs: number,
): () => Promise<CatalogConnection> {
  const cache = new WeakMap<object, OnConnection>();
  let serverBounds = true;
  return async () => {
    const promised = await pool.getConnection();
    const core = promised.connection as unknown as object;
    let on = cache.get(core);
    if (on === undefined) {
      const db = mysqlDrizzle(promised);
      on = { db, store: storeOf(db, 'mysql') };
      cache.set(core, on);
    }
    const query = async (text: string) => void (await promised.query(text));
    // The session's bound set to what this request has left, when it differs from what it is now (a round
    // trip only then: never while requests have more time left than the statement bound).
    const prepare = async (serverMs: number) => {
      const wanted = serverMs >= statementTimeoutMs ? statementTimeoutMs : step(serverMs);
      if (!serverBounds || (sessionBound.get(core) ?? statementTimeoutMs) === wanted) return;
      await query(`SET SESSION max_statement_time = ${wanted / 1_000}`).then(
        () => void sessionBound.set(core, wanted),
        (error: { errno?: number }) => {
          if (error.errno !== 1193) throw error; // ER_UNKNOWN_SYSTEM_VARIABLE: MySQL has no such bound
          serverBounds = false;
        },
      );
    };
    return {
      executor: executorOn(on.db, on.store.inTransaction(on.db as never), 'mysql'),
      db: on.db,
      store: on.store,
      prepare,
      begin: async (serverMs) => {
        await prepare(serverMs);
        await query('BEGIN');
      },
      commit: () => query('COMMIT'),
      rollback: () => query('ROLLBACK'),
      release: () => promised.release(),
      // Removed from the pool and its socket destroyed. mysql2's own `destroy` only half-closes the socket
      // (`stream.end()`), which waits for the server's FIN: a path that has gone silent never sends one, and the
      // socket would stay this process's for ever.
      destroy: () => {
        promised.destroy();
        (promised.connection as unknown as { stream?: { destroy?: () => void } }).stream?.destroy?.();
      },
    };
  };
}
