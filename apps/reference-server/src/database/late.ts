import type { IdempotencyStore, TransactionalStore } from '@idem/core';
import type { CatalogDatabase } from './catalog-database.js';
import type { Tables } from './migrate.js';
import { dialectOf, openDatabase } from './open.js';
import type { DatabaseOptions } from './options.js';

/** The catalog's database, there at once, and the one it stands for once that is open. */
export interface LateDatabase {
  /** Answers as the database does once it is open; until then every call fails as a refused connection. */
  readonly db: CatalogDatabase;
  /** Resolves once the database is open (schema made); rejects only if `db.close()` stopped the attempts. */
  readonly opened: Promise<CatalogDatabase>;
}

export interface RetryOptions {
  /** The longest pause between two attempts, in ms; pauses double from 100 ms, with jitter. */
  readonly maxDelayMs: number;
  /** Told of each failed attempt and the pause before the next one. */
  readonly onRetry?: (error: unknown, attempt: number, delayMs: number) => void;
}

/** What a call gets before the database is open: a refused connection, answered with a retryable 503. */
const notYet = () =>
  Object.assign(new Error('the catalog database is not reachable yet'), { code: 'ECONNREFUSED' });

/**
 * Open the database, retrying with exponential backoff and jitter until it answers: a node started while its
 * database is down (or not up yet) waits for it instead of exiting, and answers `/live` meanwhile, `/ready`
 * with 503, and every request that needs the database with a retryable 503.
 */
export function openWithRetry(
  url: string,
  options: DatabaseOptions,
  retry: RetryOptions,
  tables: Tables = 'catalog',
): LateDatabase {
  let current: CatalogDatabase | undefined;
  let stopped = false;
  let wake = () => {};
  const need = (): CatalogDatabase => {
    if (current === undefined) throw notYet();
    return current;
  };
  const opened = (async () => {
    for (let attempt = 1; ; attempt++) {
      try {
        current = await openDatabase(url, options, tables);
        return current;
      } catch (error) {
        if (stopped) throw error;
        const ceiling = Math.min(retry.maxDelayMs, 100 * 2 ** Math.min(attempt - 1, 20));
        const delayMs = Math.round(ceiling / 2 + (Math.random() * ceiling) / 2);
        retry.onRetry?.(error, attempt, delayMs);
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, delayMs);
          wake = () => {
            clearTimeout(timer);
            resolve();
          };
        });
        if (stopped) throw error;
      }
    }
  })();
  opened.catch(() => {}); // told to the caller through `opened`; a stop is no failure

  const store: IdempotencyStore = {
    reserve: async (params) => need().store.reserve(params),
    // A record read at once stays so (see sqlite.ts); not open yet, it is a rejected promise like the rest.
    load: (params) => (current === undefined ? Promise.reject(notYet()) : current.store.load(params)),
    finalize: async (params) => need().store.finalize(params),
    release: async (params) => need().store.release(params),
    renewLease: async (params) => need().store.renewLease(params),
    purgeExpired: async (params) => need().store.purgeExpired(params),
  };
  const idempotency: TransactionalStore = {
    reserve: async (params) => need().idempotency.reserve(params),
    finalize: async (params) => need().idempotency.finalize(params),
    release: async (params) => need().idempotency.release(params),
  };
  const db: CatalogDatabase = {
    dialect: dialectOf(url),
    valueLimit: {
      get maxBytes() {
        return need().valueLimit.maxBytes;
      },
      bytesOf: (text) => need().valueLimit.bytesOf(text),
    },
    store,
    idempotency,
    lock: (mode) => need().lock(mode),
    rows: async (statement) => need().rows(statement),
    run: async (statement) => need().run(statement),
    until: (deadline) => ({
      lock: (mode) => need().lock(mode),
      rows: async (statement) => need().until(deadline).rows(statement),
      run: async (statement) => need().until(deadline).run(statement),
      idempotency: {
        reserve: async (params) => need().until(deadline).idempotency.reserve(params),
        finalize: async (params) => need().until(deadline).idempotency.finalize(params),
        release: async (params) => need().until(deadline).idempotency.release(params),
      },
    }),
    transaction: async (body, deadline) => need().transaction(body, deadline),
    ping: async (deadline) => need().ping(deadline),
    close: async () => {
      stopped = true;
      wake();
      const open = await opened.catch(() => undefined);
      await open?.close();
    },
  };
  return { db, opened };
}
