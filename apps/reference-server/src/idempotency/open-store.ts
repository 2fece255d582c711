import type { IdempotencyStore } from '@idem/core';
import { createMemoryStore } from '@idem/store-memory';
import { createRedisStore } from '@idem/store-redis';
import type { FastifyBaseLogger } from 'fastify';
import { Cluster, Redis } from 'ioredis';
import type { ServerConfig } from '../config.js';
import type { CatalogDatabase } from '../database/catalog-database.js';
import { type Deadline, NO_DEADLINE, within } from '../database/deadline.js';
import { openWithRetry } from '../database/late.js';
import { databaseOptions } from '../database/options.js';
import { whyUnreachable } from '../database/unreachable.js';
import { logText } from '../observability/log-text.js';
import { redactedText } from '../setting-error.js';
import type { Fence, IdempotencyStoreConfig } from './store-settings.js';

/** What `/health` says of the store: its kind, where it is and how a key is fenced. Never a URL. */
export type StoreDescription =
  | { readonly store: 'sql'; readonly database: 'catalog' | 'separate'; readonly fence: Fence }
  | { readonly store: 'memory'; readonly fence: Fence }
  | { readonly store: 'redis'; readonly topology: 'standalone' | 'cluster'; readonly fence: Fence };

/** The idempotency store the server runs on, as IDEMPOTENCY_STORE and IDEMPOTENCY_STORE_URL chose it. */
export interface IdempotencyBackend {
  readonly description: StoreDescription;
  /** `transaction`: reserve and finalize in each mutation's catalog transaction; `lease`: around it. */
  readonly fence: Fence;
  /** The store, as the coordinator and the purge call it. */
  readonly store: IdempotencyStore;
  /** Resolves once the store answers, rejects with why not; `deadline` bounds the wait (a probe's). */
  ping(deadline?: Deadline): Promise<void>;
  /** Closes what was opened for the store (a pool, a Redis client): never the catalog's database. */
  close(): Promise<void>;
}

/** Where a store other than the catalog's own database keeps the keys, for the start-up line. */
const WHERE = {
  sql: 'in a database of their own',
  memory: "in this process's memory (one node only)",
  redis: 'in Redis',
} as const;

/** How long a Redis client may take to say goodbye (QUIT) before its sockets are closed anyway. */
const QUIT_MS = 1_000;
/** The longest a ping of Redis waits, when its caller gives it longer (a probe has its own bound). */
const PING_MS = 10_000;

/**
 * Open the store IDEMPOTENCY_STORE names. Nothing here waits for the store: a database or Redis that is not
 * reachable yet is tried again and again (as the catalog's database is), and until then keyed mutations answer
 * a retryable 503 while every other request is served. Every failure is one line in the log, with the host but
 * never the URL's password.
 */
export function openIdempotencyStore(
  config: ServerConfig,
  db: CatalogDatabase,
  log: FastifyBaseLogger,
): IdempotencyBackend {
  const chosen: IdempotencyStoreConfig = config.idempotency.store;
  // Turned off, nothing is opened for a store (no pool, no Redis client): the header is ignored.
  if (!config.idempotency.enabled) return onCatalog(db, 'transaction');
  if (chosen.fence === 'lease')
    log.info(
      { idempotencyStore: chosen.kind },
      `idempotency keys are held ${WHERE[chosen.kind]} under a lease, not in the catalog's transactions`,
    );
  switch (chosen.kind) {
    case 'memory': {
      const store = createMemoryStore();
      return {
        description: { store: 'memory', fence: chosen.fence },
        fence: chosen.fence,
        store,
        ping: async () => {},
        close: () => store.close(),
      };
    }
    case 'redis':
      return openRedis(chosen, log);
    default:
      if (chosen.database === 'catalog') return onCatalog(db, chosen.fence);
      return openSeparateSql(config, chosen, log);
  }
}

/** The catalog's own database: its records commit with each mutation; main.ts closes it. */
const onCatalog = (db: CatalogDatabase, fence: Fence): IdempotencyBackend => ({
  description: { store: 'sql', database: 'catalog', fence },
  fence,
  store: db.store,
  ping: (deadline) => db.ping(deadline),
  close: async () => {},
});

function openSeparateSql(
  config: ServerConfig,
  chosen: Extract<IdempotencyStoreConfig, { database: 'separate' }>,
  log: FastifyBaseLogger,
): IdempotencyBackend {
  const late = openWithRetry(
    chosen.url,
    { ...databaseOptions(config), poolSize: chosen.poolSize },
    {
      maxDelayMs: config.database.retryMaxDelayMs,
      onRetry: (error, attempt, delayMs) => {
        const why = whyUnreachable(error, chosen.url);
        log.warn(
          { attempt, retryInMs: delayMs, cause: why },
          `the idempotency store's database: ${why}; trying again in ${delayMs} ms (attempt ${attempt})`,
        );
      },
    },
    'idempotency',
  );
  late.opened.then(
    () => log.info("the idempotency store's database is open"),
    () => {}, // rejects only when closed before it opened
  );
  return {
    description: { store: 'sql', database: 'separate', fence: chosen.fence },
    fence: chosen.fence,
    store: late.db.store,
    ping: (deadline) => late.db.ping(deadline),
    close: () => late.db.close(),
  };
}

function openRedis(
  chosen: Extract<IdempotencyStoreConfig, { kind: 'redis' }>,
  log: FastifyBaseLogger,
): IdempotencyBackend {
  const { connection } = chosen;
  // ioredis's defaults otherwise: it reconnects by itself (pauses up to 2 s), and a call made while it is not
  // connected waits in its queue, bounded by the coordinator's store timeout (a 503 after it). A client that
  // gives up (its queue flushed after 20 reconnects) fails the call the same way.
  const client =
    connection.mode === 'standalone'
      ? new Redis(connection.url, { connectionName: 'iceberg-catalog-idempotency' })
      : new Cluster(
          connection.nodes.map(({ host, port }) => ({ host, port })),
          {
            redisOptions: {
              connectionName: 'iceberg-catalog-idempotency',
              ...(connection.username === undefined ? {} : { username: connection.username }),
              ...(connection.password === undefined ? {} : { password: connection.password }),
            },
          },
        );
  // An 'error' nobody listens to is printed by ioredis itself on every reconnect attempt; one line per cause
  // instead, until the client is ready again (its message names the host, never the password).
  let lastCause: string | undefined;
  client.on('error', (error: Error) => {
    const cause = logText(redactedText(error.message.split('\n', 1)[0] ?? 'error')).slice(0, 200);
    if (cause === lastCause) return;
    lastCause = cause;
    log.warn({ cause }, `the idempotency store's Redis is not reachable: ${cause}; ioredis keeps trying`);
  });
  client.on('ready', () => {
    if (lastCause !== undefined) log.info("the idempotency store's Redis is reachable again");
    lastCause = undefined;
  });
  return {
    description: { store: 'redis', topology: connection.mode, fence: chosen.fence },
    fence: chosen.fence,
    store: createRedisStore(client, { prefix: chosen.prefix }),
    ping: async (deadline = NO_DEADLINE) => {
      await within(PING_MS, 'the ping', () => client.ping(), deadline);
    },
    close: async () => {
      // QUIT answers once the replies before it are in; a client that cannot reach Redis is simply cut off.
      await within(QUIT_MS, 'QUIT', () => client.quit()).catch(() => {});
      client.disconnect();
    },
  };
}
