import type { IdempotencyStore } from '@idem/core';
import { createRedisStore } from '@idem/store-redis';
import {
  createSqlStore,
  type DialectName,
  ensureSchema,
  type SupportedDb,
  schemaStatements,
  sqlRows,
} from '@idem/store-sql';
import Database from 'better-sqlite3';
import { sql } from 'drizzle-orm';
import { drizzle as sqliteDrizzle } from 'drizzle-orm/better-sqlite3';
import { drizzle as mysqlDrizzle } from 'drizzle-orm/mysql2';
import { drizzle as pgDrizzle } from 'drizzle-orm/node-postgres';
import { Cluster, Redis } from 'ioredis';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { CliError, ExitCode } from './cli-error.js';
import type { StoreUrl } from './store-url.js';

/** How to open a store: the SQL table, the Redis prefix, and how long to wait for the server. */
export interface OpenOptions {
  /** The SQL table of records. @default 'idem_records' */
  readonly table?: string;
  /** The Redis key prefix. @default 'idem:' */
  readonly prefix?: string;
  /** How long connecting, and each call, may take. @default 10_000 */
  readonly timeoutMs?: number;
  /** Create a SQLite file that does not exist yet (only `migrate` does). @default false */
  readonly createFile?: boolean;
}

/** What the schema step of `migrate` did. */
export interface MigrateOutcome {
  /** `created` when the table was missing, `current` when it was there (its index was checked too). */
  readonly result: 'created' | 'current';
  readonly statements: readonly string[];
}

/** A store opened from a URL, with what only some backends have. */
export interface OpenedStore {
  readonly kind: StoreUrl['kind'];
  readonly store: IdempotencyStore;
  /** SQL stores: the DDL `migrate` runs, and running it. Redis needs no schema. */
  readonly schema?: {
    readonly dialect: DialectName;
    readonly table: string;
    statements(): string[];
    /** Whether the table is there (a probe that reads no row). */
    exists(): Promise<boolean>;
    migrate(): Promise<MigrateOutcome>;
  };
  close(): Promise<void>;
}

const DEFAULT_TABLE = 'idem_records';

/** SQL-backed store with its schema step; `close` ends the connection it owns. */
function sqlStore(
  kind: 'postgres' | 'mysql' | 'sqlite',
  dialect: DialectName,
  db: SupportedDb,
  table: string,
  close: () => Promise<void>,
): OpenedStore {
  const store = createSqlStore(db as never, { dialect, table } as never) as IdempotencyStore;
  const exists = async () => {
    try {
      await sqlRows(db, sql`SELECT 1 FROM ${sql.identifier(table)} LIMIT 0`);
      return true;
    } catch (error) {
      if (isMissingTable(error)) return false;
      throw error;
    }
  };
  return {
    kind,
    store,
    schema: {
      dialect,
      table,
      statements: () => schemaStatements(dialect, table),
      exists,
      async migrate() {
        const existed = await exists();
        await ensureSchema(db, { dialect, table });
        return { result: existed ? 'current' : 'created', statements: schemaStatements(dialect, table) };
      },
    },
    close,
  };
}

/**
 * How long past `--timeout` the client waits for an answer: the database's own bound (PostgreSQL's
 * `statement_timeout`, MariaDB's `max_statement_time`) ends a slow statement at `--timeout` itself, undone, and
 * its refusal comes in this margin; only a path that has gone silent outlasts it.
 */
const CLIENT_MARGIN_MS = 500;

/** The store's calls bounded on the client (its asynchronous ones: `inTransaction` is left as it is). */
const BOUNDED_CALLS = new Set([
  'reserve',
  'load',
  'finalize',
  'release',
  'renewLease',
  'purgeExpired',
  'forget',
  'list',
  'stats',
]);

/** A call that did not answer within `--timeout` (read as such by describeError). */
const timedOut = (timeoutMs: number) =>
  Object.assign(new Error(`the call timed out after ${timeoutMs} ms`), { code: 'ETIMEDOUT' });

/** `call`, or a {@link timedOut} rejection once `timeoutMs` has passed (the call is left to finish alone). */
function within<T>(timeoutMs: number, call: () => Promise<T>, onTimeout?: () => void): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => {
      onTimeout?.();
      reject(timedOut(timeoutMs));
    }, timeoutMs);
  });
  return Promise.race([call(), late]).finally(() => clearTimeout(timer));
}

/**
 * A server database's store, checked with `probe`, with every call bounded on the client too. The database's
 * own bounds never end a call whose connection went silent after it connected (a stalled path, a proxy that
 * stopped forwarding), and neither do the drivers: without this, `--timeout` would not hold. Once a call has
 * gone unanswered, closing does not wait for the pool: its goodbye would wait behind that call for ever (pg-pool
 * ends once every client is back, mysql2 queues its QUIT after the call), and the process exits anyway.
 */
async function bounded(
  opened: OpenedStore,
  timeoutMs: number,
  probe: () => Promise<unknown>,
): Promise<OpenedStore> {
  let silent = false;
  const limitMs = timeoutMs + CLIENT_MARGIN_MS;
  const bound = <T>(call: () => Promise<T>) =>
    within(limitMs, call, () => {
      silent = true;
    });
  const store = Object.fromEntries(
    Object.entries(opened.store).map(([name, value]) => [
      name,
      typeof value === 'function' && BOUNDED_CALLS.has(name)
        ? (...args: unknown[]) => bound(async () => value.apply(opened.store, args))
        : value,
    ]),
  ) as unknown as IdempotencyStore;
  const { schema } = opened;
  const result: OpenedStore = {
    ...opened,
    store,
    ...(schema === undefined
      ? {}
      : {
          schema: {
            ...schema,
            exists: () => bound(() => schema.exists()),
            migrate: () => bound(() => schema.migrate()),
          },
        }),
    async close() {
      const closing = opened.close();
      // Never failing; bounded, and not waited for at all behind a call that never answered.
      if (silent) closing.catch(() => {});
      else await within(limitMs, () => closing).catch(() => {});
    },
  };
  await ping(result, () => bound(probe));
  return result;
}

/** PostgreSQL undefined_table, MySQL ER_NO_SUCH_TABLE, SQLite "no such table", wherever Drizzle put it. */
export function isMissingTable(error: unknown): boolean {
  for (let e: unknown = error; typeof e === 'object' && e !== null; e = (e as { cause?: unknown }).cause) {
    const { code, message } = e as { code?: unknown; message?: unknown };
    if (code === '42P01' || code === 'ER_NO_SUCH_TABLE') return true;
    if (typeof message === 'string' && /no such table/i.test(message)) return true;
  }
  return false;
}

/** A store refuses a `--table` or `--prefix` it cannot use with a TypeError: the operator's usage error. */
export function usableOption<T>(make: () => T): T {
  try {
    return make();
  } catch (error) {
    if (error instanceof TypeError) throw new CliError(error.message, ExitCode.Usage, { cause: error });
    throw error;
  }
}

/**
 * Open the store a URL names, and check that its server answers (within `timeoutMs`): an unreachable server
 * fails here, with one line, before any command runs.
 */
export async function openStore(target: StoreUrl, options: OpenOptions = {}): Promise<OpenedStore> {
  const table = options.table ?? DEFAULT_TABLE;
  const timeoutMs = options.timeoutMs ?? 10_000;
  // Checked before anything is opened (or a SQLite file created) for it.
  if (target.kind !== 'redis' && target.kind !== 'redis-cluster')
    usableOption(() => schemaStatements(target.kind, table));
  switch (target.kind) {
    case 'postgres': {
      const pool = new pg.Pool({
        connectionString: target.url,
        max: 2,
        connectionTimeoutMillis: timeoutMs,
        statement_timeout: timeoutMs,
      });
      pool.on('error', () => {}); // an idle connection that drops is reported by the next query
      const opened = sqlStore('postgres', 'postgres', pgDrizzle(pool), table, () => pool.end());
      return bounded(opened, timeoutMs, () => pool.query('SELECT 1'));
    }
    case 'mysql': {
      const pool = mysql.createPool({ uri: target.url, connectionLimit: 2, connectTimeout: timeoutMs });
      // A statement waiting for a lock (a LOCK TABLES, an ALTER, a row another transaction holds) waits up to a
      // year for a table's. The server's lock waits, in whole seconds, bound it; the event comes before the
      // connection is handed out, so these run first on it.
      const lockWaitS = Math.max(1, Math.ceil(timeoutMs / 1000));
      pool.pool.on('connection', (connection) => {
        connection.query(
          `SET SESSION lock_wait_timeout = ${lockWaitS}, innodb_lock_wait_timeout = ${lockWaitS}`,
          () => {},
        );
        // MariaDB's statement bound, as PostgreSQL's statement_timeout: a slow statement is ended undone at
        // --timeout, rather than given up on by the client and left to finish (MySQL has no such variable:
        // refused, and the client's bound holds alone).
        connection.query(`SET SESSION max_statement_time = ${timeoutMs / 1000}`, () => {});
      });
      const opened = sqlStore('mysql', 'mysql', mysqlDrizzle(pool), table, () => pool.end());
      return bounded(opened, timeoutMs, () => pool.query('SELECT 1'));
    }
    case 'sqlite': {
      let connection: Database.Database;
      try {
        connection = new Database(target.file, {
          fileMustExist: options.createFile !== true,
          timeout: timeoutMs,
        });
      } catch (error) {
        const missing =
          options.createFile !== true &&
          /unable to open|does not exist/i.test(String((error as Error).message));
        throw new CliError(
          missing
            ? `there is no SQLite database at ${target.file} (idem migrate creates one)`
            : `cannot open the SQLite database ${target.file}: ${(error as Error).message}`,
          ExitCode.Failed,
          { cause: error },
        );
      }
      return sqlStore('sqlite', 'sqlite', sqliteDrizzle(connection), table, async () => {
        connection.close();
      });
    }
    case 'redis': {
      const client = new Redis(target.url, {
        lazyConnect: true,
        connectTimeout: timeoutMs,
        commandTimeout: timeoutMs,
        maxRetriesPerRequest: 0,
        retryStrategy: () => null,
      });
      const opened = redisStore('redis', client, options.prefix);
      const connect = connected(client);
      await ping(opened, async () => {
        await connect();
        // A Cluster node holds the records of its own slots only: list and stats would show a part of them as
        // the whole, inspect and forget answer MOVED. A server that refuses INFO is taken as standalone.
        const info = await client.info('cluster').catch(() => '');
        if (/^cluster_enabled:1/m.test(info))
          throw new CliError(
            `${target.shown} is a Redis Cluster node: name the cluster, redis+cluster://host:port[,host:port…]`,
            ExitCode.Usage,
          );
      });
      return opened;
    }
    case 'redis-cluster': {
      const auth = {
        ...(target.username === undefined ? {} : { username: target.username }),
        ...(target.password === undefined ? {} : { password: target.password }),
      };
      const cluster = new Cluster(target.nodes as { host: string; port: number }[], {
        lazyConnect: true,
        clusterRetryStrategy: () => null,
        redisOptions: {
          ...auth,
          connectTimeout: timeoutMs,
          commandTimeout: timeoutMs,
          maxRetriesPerRequest: 0,
          ...(target.tls ? { tls: {} } : {}),
        },
      });
      const opened = redisStore('redis-cluster', cluster, options.prefix);
      await ping(opened, connected(cluster));
      return opened;
    }
  }
}

function redisStore(kind: 'redis' | 'redis-cluster', client: Redis | Cluster, prefix?: string): OpenedStore {
  return {
    kind,
    store: usableOption(() => createRedisStore(client, prefix === undefined ? {} : { prefix })),
    async close() {
      client.disconnect();
    },
  };
}

/**
 * Connect an ioredis client. Its `connect()` rejects with a bare "Connection is closed" once it gives up; the
 * reason (refused, unresolvable host, bad credentials) came as an `error` event before, and is what is thrown.
 */
function connected(client: Redis | Cluster): () => Promise<void> {
  let reason: unknown;
  client.on('error', (error: unknown) => {
    reason ??= error;
  });
  return async () => {
    try {
      await client.connect();
    } catch (error) {
      throw reason ?? error;
    }
    // A server's refusal of a handshake command (the SELECT of a database it does not have) is only an `error`
    // event: the connection comes up on database 0, where the command must not run.
    if (reason !== undefined && client instanceof Redis) throw reason;
  };
}

/** Run `probe`; when it fails, close what was opened and rethrow (the caller turns it into one line). */
async function ping(opened: OpenedStore, probe: () => Promise<unknown>): Promise<void> {
  try {
    await probe();
  } catch (error) {
    await opened.close().catch(() => {});
    throw error;
  }
}
