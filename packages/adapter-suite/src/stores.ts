import { randomBytes } from 'node:crypto';
import type { IdempotencyStore } from '@idem/core';
import { createMemoryStore } from '@idem/store-memory';
import { createSqlStore, ensureSchema } from '@idem/store-sql';
import Database from 'better-sqlite3';
import { drizzle } from 'drizzle-orm/better-sqlite3';

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
};

/** Wrap a store to count its calls, or to make every call fail or hang. */
export function instrument(store: IdempotencyStore, mode: 'pass' | 'throw' | 'hang' = 'pass') {
  let calls = 0;
  const wrap =
    <A, R>(fn: (a: A) => Promise<R>) =>
    (a: A): Promise<R> => {
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
