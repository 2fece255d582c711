import type { IdempotencyStore } from '@idem/core';
import type { SupportedDb } from '@idem/store-sql';
import { sql } from 'drizzle-orm';
import type { CatalogDatabase } from './catalog-database.js';
import { type Deadline, NO_DEADLINE, onConnection, transactionOn, within } from './deadline.js';
import { type Executor, executorOn } from './executor.js';
import { migrate, type Tables } from './migrate.js';
import { mysqlValueLimit } from './mysql-packet.js';
import { CLIENT_MARGIN_MS, type DatabaseBounds } from './options.js';
import type { CatalogConnection } from './pool.js';
import { LARGE_VALUES } from './value-limit.js';

/** A pooled server database, as `pooledDatabase` takes it. */
export interface PooledDatabaseOptions {
  readonly dialect: 'postgres' | 'mysql';
  /** Drizzle over the pool. Every statement runs on a connection held by its call (`acquire`), none on this. */
  readonly db: SupportedDb;
  /** A connection of the pool, for one call or one transaction (database/pool.ts). */
  readonly acquire: () => Promise<CatalogConnection>;
  /** Ends the pool. */
  readonly close: () => Promise<void>;
  readonly bounds: DatabaseBounds;
  /** Which tables it holds (made at open). */
  readonly tables: Tables;
}

/**
 * A CatalogDatabase over a pooled server database. Each call runs on a connection it checks out itself, every
 * wait within its own bound and the time left before the request's deadline; a connection whose call was given
 * up on is destroyed, never handed to the next request (see database/deadline.ts).
 */
export async function pooledDatabase({
  dialect,
  db,
  acquire,
  close,
  bounds,
  tables,
}: PooledDatabaseOptions): Promise<CatalogDatabase> {
  // Every call is bounded on the client too: a database that keeps its sockets open and stops answering
  // (a partition) never answers a server-side timeout. A margin past the server's own statement timeout, so
  // that a database that does answer reports its timeout first, on a connection that stays usable.
  const statementMs = bounds.statementTimeoutMs + CLIENT_MARGIN_MS;
  const connections = {
    acquireTimeoutMs: bounds.acquireTimeoutMs,
    statementTimeoutMs: statementMs,
    serverTimeoutMs: bounds.statementTimeoutMs,
  };
  const on = <T>(deadline: Deadline, what: string, work: (connection: CatalogConnection) => Promise<T>) =>
    onConnection(acquire, connections, deadline, work, what);
  const { lock } = executorOn(db, undefined as never, dialect);
  const store: IdempotencyStore = {
    reserve: (params) =>
      on(NO_DEADLINE, "the idempotency store's reserve", async (c) => c.store.reserve(params)),
    load: (params) => on(NO_DEADLINE, "the idempotency store's load", async (c) => c.store.load(params)),
    finalize: (params) =>
      on(NO_DEADLINE, "the idempotency store's finalize", async (c) => c.store.finalize(params)),
    release: (params) =>
      on(NO_DEADLINE, "the idempotency store's release", async (c) => c.store.release(params)),
    renewLease: (params) =>
      on(NO_DEADLINE, "the idempotency store's renewLease", async (c) => c.store.renewLease(params)),
    purgeExpired: (params) =>
      on(NO_DEADLINE, "the idempotency store's purgeExpired", async (c) => c.store.purgeExpired(params)),
  };
  const until = (deadline: Deadline): Executor => ({
    lock,
    rows: (statement) => on(deadline, 'a statement', (c) => c.executor.rows(statement)),
    run: (statement) => on(deadline, 'a statement', (c) => c.executor.run(statement)),
    // Outside a transaction, each call is a statement of its own.
    idempotency: {
      reserve: (params) => on(deadline, 'a statement', async (c) => c.executor.idempotency.reserve(params)),
      finalize: (params) => on(deadline, 'a statement', async (c) => c.executor.idempotency.finalize(params)),
      release: (params) => on(deadline, 'a statement', async (c) => c.executor.idempotency.release(params)),
    },
  });
  const direct = until(NO_DEADLINE);
  try {
    // On a connection held as a request's is: one given up on (a path that stalls while the node starts) is
    // destroyed, so that the pool can close and the next attempt start afresh.
    await on(NO_DEADLINE, 'the schema', (c) => migrate(c.db, dialect, tables));
    const valueLimit =
      dialect === 'mysql' ? await on(NO_DEADLINE, 'a statement', (c) => mysqlValueLimit(c.db)) : LARGE_VALUES;
    return {
      dialect,
      valueLimit,
      store,
      ...direct,
      until,
      transaction: (body, deadline = NO_DEADLINE) => transactionOn(acquire, connections, deadline, body),
      ping: async (deadline = NO_DEADLINE) => void (await until(deadline).rows(sql`SELECT 1`)),
      close,
    };
  } catch (error) {
    // Not reachable (yet): the caller tries again with a new pool, so this one must not stay open. Its close is
    // bounded too: a connection that never answers would hold a pool's goodbye for ever, and the attempts with it.
    await within(bounds.acquireTimeoutMs, 'closing', close).catch(() => {});
    throw error;
  }
}
