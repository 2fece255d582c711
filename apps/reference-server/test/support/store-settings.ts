import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { backends, type FreshDatabase } from './databases.js';
import { CLUSTER_URL, clusterUp, REDIS_URL, redisUp, sweep, uniquePrefix } from './redis.js';

const [postgres, mariadb] = backends as [(typeof backends)[number], (typeof backends)[number]];

/** A catalog database and an idempotency store of one test suite's own, and how to remove them. */
export interface Prepared {
  /** DATABASE_URL: every node of the suite shares it. */
  readonly databaseUrl: string;
  /** The store's settings (IDEMPOTENCY_STORE, _URL, _PREFIX). */
  readonly env: Record<string, string>;
  drop(): Promise<void>;
}

/**
 * One value of the store settings (IDEMPOTENCY_STORE, IDEMPOTENCY_STORE_URL) with a catalog database under it,
 * as the idempotency suites run on each.
 */
export interface StoreSetting {
  readonly name: string;
  /** How a key is held: in the mutation's transaction (the catalog's own database), or under a lease. */
  readonly fence: 'transaction' | 'lease';
  /**
   * How a duplicate of a request in flight waits: on the record's row lock (`row`, PostgreSQL and MySQL), for the
   * one SQLite connection's turn (`turn`: as long as the request's deadline allows), or polling the store
   * (`poll`). `row` and `poll` give up after IDEMPOTENCY_MAX_WAIT_MS with a retryable 503.
   */
  readonly inFlight: 'row' | 'turn' | 'poll';
  /**
   * Whether nodes share keys: two nodes on one catalog database do, unless the catalog is SQLite (one
   * process's database) or the store is memory (one process's too).
   */
  readonly nodes: 'many' | 'one';
  /** Whether the services it needs answer (a skip with the reason, or a failure under CI=true). */
  up(): Promise<boolean>;
  prepare(): Promise<Prepared>;
}

const both = async (...checks: (() => Promise<boolean>)[]) => {
  for (const check of checks) if (!(await check())) return false;
  return true;
};
const always = async () => true;

/** A fresh SQLite file in a directory of its own (two nodes never share it: SQLite is one node's). */
function sqliteFile(): FreshDatabase {
  const dir = mkdtempSync(join(tmpdir(), 'idem-store-settings-'));
  return {
    url: `sqlite:${join(dir, 'catalog.db')}`,
    drop: async () => rmSync(dir, { recursive: true, force: true }),
  };
}

const catalogOn =
  (catalog: () => Promise<FreshDatabase> | FreshDatabase, store: Record<string, string>) =>
  async (): Promise<Prepared> => {
    const database = await catalog();
    return { databaseUrl: database.url, env: store, drop: () => database.drop() };
  };

/** A store on a database of its own, made (and dropped) with the catalog's. */
const separate =
  (catalog: () => Promise<FreshDatabase> | FreshDatabase, store: () => Promise<FreshDatabase>) =>
  async (): Promise<Prepared> => {
    const [database, records] = await Promise.all([catalog(), store()]);
    return {
      databaseUrl: database.url,
      env: { IDEMPOTENCY_STORE: 'sql', IDEMPOTENCY_STORE_URL: records.url },
      drop: async () => {
        await database.drop();
        await records.drop();
      },
    };
  };

/** Redis under a prefix of the suite's own, swept when it is done. */
const redis = (cluster: boolean, catalog: () => Promise<FreshDatabase>) => async (): Promise<Prepared> => {
  const database = await catalog();
  const prefix = uniquePrefix();
  return {
    databaseUrl: database.url,
    env: {
      IDEMPOTENCY_STORE: 'redis',
      IDEMPOTENCY_STORE_URL: cluster ? CLUSTER_URL : REDIS_URL,
      IDEMPOTENCY_STORE_PREFIX: prefix,
    },
    drop: async () => {
      await sweep(cluster, prefix);
      await database.drop();
    },
  };
};

/** Every store setting the idempotency suites run on. */
export const STORE_SETTINGS: readonly StoreSetting[] = [
  {
    name: 'sql on the catalog’s own SQLite database (the default)',
    fence: 'transaction',
    inFlight: 'turn',
    nodes: 'one',
    up: always,
    prepare: catalogOn(sqliteFile, {}),
  },
  {
    name: 'sql on the catalog’s own PostgreSQL database',
    fence: 'transaction',
    inFlight: 'row',
    nodes: 'many',
    up: postgres.up,
    prepare: catalogOn(postgres.fresh, {}),
  },
  {
    name: 'sql on the catalog’s own MariaDB database',
    fence: 'transaction',
    inFlight: 'row',
    nodes: 'many',
    up: mariadb.up,
    prepare: catalogOn(mariadb.fresh, {}),
  },
  {
    name: 'sql on a PostgreSQL database of its own, the catalog on SQLite',
    fence: 'lease',
    inFlight: 'poll',
    nodes: 'one',
    up: postgres.up,
    prepare: separate(sqliteFile, postgres.fresh),
  },
  {
    name: 'sql on a PostgreSQL database of its own, the catalog on another PostgreSQL database',
    fence: 'lease',
    inFlight: 'poll',
    nodes: 'many',
    up: postgres.up,
    prepare: separate(postgres.fresh, postgres.fresh),
  },
  {
    name: 'sql on a MariaDB database of its own, the catalog on PostgreSQL',
    fence: 'lease',
    inFlight: 'poll',
    nodes: 'many',
    up: () => both(postgres.up, mariadb.up),
    prepare: separate(postgres.fresh, mariadb.fresh),
  },
  {
    name: 'memory, the catalog on SQLite',
    fence: 'lease',
    inFlight: 'poll',
    nodes: 'one',
    up: always,
    prepare: catalogOn(sqliteFile, { IDEMPOTENCY_STORE: 'memory' }),
  },
  {
    name: 'redis (standalone), the catalog on PostgreSQL',
    fence: 'lease',
    inFlight: 'poll',
    nodes: 'many',
    up: () => both(postgres.up, redisUp),
    prepare: redis(false, postgres.fresh),
  },
  {
    name: 'redis (cluster, redis+cluster://), the catalog on PostgreSQL',
    fence: 'lease',
    inFlight: 'poll',
    nodes: 'many',
    up: () => both(postgres.up, clusterUp),
    prepare: redis(true, postgres.fresh),
  },
];
