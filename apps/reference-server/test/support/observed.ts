import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../../src/app.js';
import { loadConfig } from '../../src/config.js';
import type { CatalogDatabase } from '../../src/database/catalog-database.js';
import { openDatabase } from '../../src/database/open.js';
import { databaseOptions } from '../../src/database/options.js';
import { freshPostgres } from './databases.js';

/** Switches a test flips on a database: an idempotency store outage, a hung ping, held transactions. */
export interface Faults {
  /** Every idempotency store call fails (connection refused). */
  storeDown: boolean;
  /** `ping` fails at once. */
  pingFails: boolean;
  /** `ping` never answers. */
  pingHangs: boolean;
  /** How many times `ping` was called. */
  pings: number;
  /** While set, catalog transactions wait for it before they commit (their key reserved, its row locked). */
  hold: Promise<void> | undefined;
}

/** A store whose every call fails as a refused connection does, while `down()` says so. */
function failing<T extends object>(target: T, down: () => boolean): T {
  return new Proxy(target, {
    get(object, property, receiver) {
      const value: unknown = Reflect.get(object, property, receiver);
      if (typeof value !== 'function') return value;
      return async (...args: unknown[]) => {
        if (down())
          throw Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
        return value.apply(object, args);
      };
    },
  });
}

/** The database with fault switches: the store, `ping` and `transaction` can be made to fail or wait. */
function faulty(db: CatalogDatabase, faults: Faults): CatalogDatabase {
  const down = () => faults.storeDown;
  return {
    ...db,
    store: failing(db.store, down),
    ping: async () => {
      faults.pings++;
      if (faults.pingFails) throw new Error('connect ECONNREFUSED');
      if (faults.pingHangs) return new Promise<void>(() => {});
      return db.ping();
    },
    transaction: (body, deadline) =>
      db.transaction(async (tx) => {
        const result = await body({ ...tx, idempotency: failing(tx.idempotency, down) });
        await faults.hold; // the key reserved and its row locked, the work done: the commit waits
        return result;
      }, deadline),
  };
}

export interface ObservedNode {
  url: string;
  app: FastifyInstance;
  faults: Faults;
  /** A fresh directory for files the test writes (the audit log). */
  dir: string;
  close(): Promise<void>;
}

/**
 * A catalog with fault switches, listening on a free port: on an in-memory SQLite database, or on a fresh
 * PostgreSQL database (where a duplicate waits on its key's row, so a held request makes it a conflict).
 */
export async function startObservedNode(
  env: Record<string, string> = {},
  on: 'sqlite' | 'postgres' = 'sqlite',
): Promise<ObservedNode> {
  const dir = mkdtempSync(join(tmpdir(), 'idem-observed-'));
  const server = on === 'postgres' ? await freshPostgres() : undefined;
  const config = loadConfig({
    DATABASE_URL: server?.url ?? 'sqlite::memory:',
    WAREHOUSE: join(dir, 'warehouse'),
    LOG_LEVEL: 'silent',
    ...env,
  });
  const faults: Faults = { storeDown: false, pingFails: false, pingHangs: false, pings: 0, hold: undefined };
  const db = await openDatabase(config.databaseUrl, databaseOptions(config));
  const app = await buildApp(config, faulty(db, faults));
  const url = await app.listen({ host: '127.0.0.1', port: 0 });
  return {
    url,
    app,
    faults,
    dir,
    async close() {
      faults.pingHangs = false;
      faults.hold = undefined;
      await app.close();
      await db.close();
      await server?.drop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A gate: `wait` resolves once `open` is called. */
export function gate(): { wait: Promise<void>; open(): void } {
  let open = () => {};
  const wait = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { wait, open };
}
