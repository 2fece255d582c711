import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { createSqlStore } from '@idem/store-sql';
import Database from 'better-sqlite3';
import { sql } from 'drizzle-orm';
import { drizzle } from 'drizzle-orm/better-sqlite3';
import type { CatalogDatabase } from './catalog-database.js';
import { boundedExecutor, DatabaseTimeout, type Deadline, NO_DEADLINE } from './deadline.js';
import { type Executor, executorOn } from './executor.js';
import { migrate, type Tables } from './migrate.js';
import { type Exclusive, exclusive, serialized } from './serialized.js';
import { LARGE_VALUES } from './value-limit.js';

/** Throws a DatabaseTimeout once `deadline` has passed: SQLite's statements cannot be stopped once they run. */
function due(deadline: Deadline, what: string): void {
  if (performance.now() >= deadline) throw new DatabaseTimeout(what, 0);
}

/**
 * `task` in its turn on SQLite's one connection, unless `deadline` passes while it waits for it. Once its turn
 * has come, it runs to its end: a task is never given up on half-way (it may be committing).
 */
function inTurn<T>(turn: Exclusive, deadline: Deadline, task: () => Promise<T>): Promise<T> {
  const leftMs = deadline - performance.now();
  if (leftMs === Number.POSITIVE_INFINITY) return turn(task);
  if (leftMs <= 0) return Promise.reject(new DatabaseTimeout('with its turn on the connection', 0));
  return new Promise<T>((resolve, reject) => {
    let state: 'waiting' | 'running' | 'abandoned' = 'waiting';
    const timer = setTimeout(() => {
      if (state !== 'waiting') return;
      state = 'abandoned';
      reject(new DatabaseTimeout('with its turn on the connection', leftMs));
    }, Math.ceil(leftMs));
    turn(async () => {
      if (state === 'abandoned') return undefined;
      state = 'running';
      clearTimeout(timer);
      return task();
    }).then(
      (value) => {
        if (state === 'running') resolve(value as T);
      },
      (error: unknown) => {
        if (state === 'running') reject(error);
      },
    );
  });
}

/** An executor on SQLite that runs no statement once `deadline` has passed. */
function checkedAt(executor: Executor, deadline: Deadline): Executor {
  if (deadline === NO_DEADLINE) return executor;
  return boundedExecutor(executor, async (what, call) => {
    due(deadline, what);
    return call();
  });
}

/**
 * The catalog on a SQLite file (or `:memory:`), over one connection for the whole process: every statement
 * and every transaction takes its turn on it.
 */
export async function openSqlite(file: string, tables: Tables = 'catalog'): Promise<CatalogDatabase> {
  if (file !== ':memory:') mkdirSync(dirname(file), { recursive: true });
  const connection = new Database(file, { timeout: 10_000 });
  connection.pragma('journal_mode = WAL');
  const db = drizzle(connection);
  await migrate(db, 'sqlite', tables);
  const store = createSqlStore(db, { dialect: 'sqlite' });
  // One connection for the whole process: every statement and every transaction takes its turn, so that a
  // transaction's statements never interleave with another request's. Inside `transaction` the connection
  // itself is in the transaction (BEGIN IMMEDIATE), so the synchronous transactional finalize runs on it.
  const turn = exclusive();
  const direct = executorOn(db, store.inTransaction(db), 'sqlite');
  return {
    dialect: 'sqlite',
    valueLimit: LARGE_VALUES,
    lock: direct.lock,
    // The coordinator's own store calls take their turn too, or they could land inside an open transaction;
    // a read (the coordinator's, before a keyed mutation's transaction) runs at once when none is open.
    store: serialized(store, turn, ['load']),
    rows: (statement) => turn(() => direct.rows(statement)),
    run: (statement) => turn(() => direct.run(statement)),
    idempotency: serialized(direct.idempotency, turn),
    // Statements are synchronous here (better-sqlite3): none can be stopped once it runs. A deadline bounds the
    // wait for the connection's turn, and is checked before each statement and before COMMIT: past it, the
    // transaction rolls back (synchronously, so nothing is left unknown) and the answer is a retryable 503.
    until: (deadline) => {
      const checked = checkedAt(direct, deadline);
      return {
        lock: direct.lock,
        rows: (statement) => inTurn(turn, deadline, () => checked.rows(statement)),
        run: (statement) => inTurn(turn, deadline, () => checked.run(statement)),
        idempotency: serialized(checked.idempotency, <T>(task: () => Promise<T>) =>
          inTurn(turn, deadline, task),
        ),
      };
    },
    transaction: (body, deadline = NO_DEADLINE) =>
      inTurn(turn, deadline, async () => {
        connection.exec('BEGIN IMMEDIATE');
        try {
          const result = await body(checkedAt(direct, deadline));
          due(deadline, 'to commit');
          connection.exec('COMMIT');
          return result;
        } catch (error) {
          connection.exec('ROLLBACK');
          throw error;
        }
      }),
    ping: (deadline = NO_DEADLINE) =>
      inTurn(turn, deadline, async () => void (await direct.rows(sql`SELECT 1`))),
    close: async () => void connection.close(),
  };
}
