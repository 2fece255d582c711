import { randomBytes } from 'node:crypto';
import type { IdempotencyStore, MaybePromise, StoredResponse } from '@idem/core';
import { createMemoryStore } from '@idem/store-memory';
import { createRedisStore } from '@idem/store-redis';
import { createSqlStore, ensureSchema } from '@idem/store-sql';
import Database from 'better-sqlite3';
import { drizzle } from 'drizzle-orm/better-sqlite3';
import { Redis } from 'ioredis';

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';

/**
 * Whether Redis answers at REDIS_URL. Under CI=true a missing server fails the run; elsewhere the Redis store
 * is left out of the suite with the reason printed.
 */
async function redisAvailable(): Promise<boolean> {
  const probe = new Redis(REDIS_URL, {
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    lazyConnect: true,
  });
  probe.on('error', () => {});
  try {
    await probe.connect();
    await probe.ping();
    return true;
  } catch (error) {
    const reason = `Redis at ${REDIS_URL} is not reachable (${(error as Error).message})`;
    if (process.env.CI === 'true') throw new Error(`${reason}; under CI=true the suite runs on Redis too`);
    console.warn(`the HTTP behaviour suite runs without the Redis store: ${reason}`);
    return false;
  } finally {
    probe.disconnect();
  }
}

/** The Redis store over a client of its own and a prefix no other test uses; `close` removes both. */
async function redisStore(): Promise<IdempotencyStore> {
  const client = new Redis(REDIS_URL);
  const prefix = `idem-suite:${randomBytes(6).toString('hex')}:`;
  return {
    ...createRedisStore(client, { prefix }),
    close: async () => {
      let cursor = '0';
      do {
        const [next, keys] = await client.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1_000);
        cursor = next;
        if (keys.length > 0) await client.unlink(...keys);
      } while (cursor !== '0');
      await client.quit();
    },
  };
}

/** The stores every adapter is tested with. */
export const stores: Record<string, () => Promise<IdempotencyStore>> = {
  memory: async () => createMemoryStore({ sweepIntervalMs: false }),
  'SQLite (store-sql)': async () => {
    const db = drizzle(new Database(':memory:'));
    const table = `idem_${randomBytes(4).toString('hex')}`;
    await ensureSchema(db, { dialect: 'sqlite', table });
    const store = createSqlStore(db, { dialect: 'sqlite', table });
    return {
      ...store,
      close: async () => {
        db.$client.close();
      },
    };
  },
  ...((await redisAvailable()) ? { 'Redis (store-redis, ioredis)': redisStore } : {}),
};

/** Wrap a store to count its calls, or to make every call fail or hang. */
export function instrument(store: IdempotencyStore, mode: 'pass' | 'throw' | 'hang' = 'pass') {
  let calls = 0;
  const wrap =
    <A, R>(fn: (a: A) => MaybePromise<R>) =>
    (a: A): MaybePromise<R> => {
      calls++;
      if (mode === 'throw') return Promise.reject(new Error('store down'));
      if (mode === 'hang') return new Promise<R>(() => {});
      return fn(a);
    };
  const wrapped: IdempotencyStore = {
    reserve: wrap((p) => store.reserve(p)),
    load: wrap((p) => store.load(p)),
    finalize: wrap((p) => store.finalize(p)),
    release: wrap((p) => store.release(p)),
    renewLease: wrap((p) => store.renewLease(p)),
    purgeExpired: wrap((p) => store.purgeExpired(p)),
  };
  return { store: wrapped, calls: () => calls };
}

/** A memory store (no sweep) that records the response of every `finalize` it is asked for, in order. */
export function spiedStore(options: Parameters<typeof createMemoryStore>[0] = {}) {
  const store = createMemoryStore({ sweepIntervalMs: false, ...options });
  const finalized: StoredResponse[] = [];
  const finalize = store.finalize.bind(store);
  (store as IdempotencyStore).finalize = async (params) => {
    finalized.push(params.response);
    return finalize(params);
  };
  return { store, finalized };
}
