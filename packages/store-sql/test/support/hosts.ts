import type { IdempotencyStore, TransactionalStore } from '@idem/core';
import { createSqlStore, ensureSchema } from '@idem/store-sql';
import Database from 'better-sqlite3';
import { sql } from 'drizzle-orm';
import { drizzle as sqliteDrizzle } from 'drizzle-orm/better-sqlite3';
import { mysqlTable, pgTable } from './backends.js';

// Hosts for the transactional tests: a database the application writes its own rows to, in the same
// transaction as the idempotency record.

/** A database the host writes to, with its transaction and its own table of orders. */
export interface Host {
  /** Run `body` in a transaction: commit when it resolves, roll back when it throws. */
  transaction<T>(
    body: (tx: { insert(id: string): Promise<void>; idem: TransactionalStore }) => Promise<T>,
    options?: { lockWaitSeconds?: number },
  ): Promise<T>;
  orders(): Promise<string[]>;
  /** The store over the host's database (its own connections, outside any transaction). */
  store: IdempotencyStore;
  close(): Promise<void>;
}

/** PostgreSQL through node-postgres; a lock wait is the transaction's `lock_timeout`. */
export async function postgresHost(): Promise<Host> {
  const { table, pool, db, store, drop } = await pgTable(6);
  const orders = `${table}_orders`;
  await db.execute(sql`CREATE TABLE ${sql.identifier(orders)} (id text PRIMARY KEY)`);
  return {
    store,
    transaction: (body, options = {}) =>
      db.transaction(async (tx) => {
        if (options.lockWaitSeconds !== undefined) {
          await tx.execute(sql.raw(`SET LOCAL lock_timeout = '${options.lockWaitSeconds}s'`));
        }
        return body({
          insert: async (id) =>
            void (await tx.execute(sql`INSERT INTO ${sql.identifier(orders)} VALUES (${id})`)),
          idem: store.inTransaction(tx),
        });
      }),
    orders: async () =>
      (await pool.query(`SELECT id FROM ${orders} ORDER BY id`)).rows.map((r) => r.id as string),
    close: () => drop(orders),
  };
}

/** MariaDB/MySQL through mysql2; a lock wait is the session's `innodb_lock_wait_timeout`. */
export async function mysqlHost(): Promise<Host> {
  const { table, pool, db, store, drop } = await mysqlTable(6);
  const orders = `${table}_orders`;
  await db.execute(sql`CREATE TABLE ${sql.identifier(orders)} (id varchar(64) PRIMARY KEY)`);
  return {
    store,
    transaction: (body, options = {}) =>
      db.transaction(async (tx) => {
        // InnoDB's wait is per session, in whole seconds; every transaction sets its own.
        await tx.execute(sql.raw(`SET SESSION innodb_lock_wait_timeout = ${options.lockWaitSeconds ?? 50}`));
        return body({
          insert: async (id) =>
            void (await tx.execute(sql`INSERT INTO ${sql.identifier(orders)} VALUES (${id})`)),
          idem: store.inTransaction(tx),
        });
      }),
    orders: async () =>
      ((await pool.query(`SELECT id FROM ${orders} ORDER BY id`))[0] as { id: string }[]).map((r) => r.id),
    close: () => drop(orders),
  };
}

/** SQLite: one connection, transactions opened on it (BEGIN IMMEDIATE) so that async work can run inside. */
export async function sqliteHost(): Promise<Host> {
  const connection = new Database(':memory:');
  const db = sqliteDrizzle(connection);
  await ensureSchema(db, { dialect: 'sqlite' });
  connection.exec('CREATE TABLE orders (id text PRIMARY KEY)');
  const store = createSqlStore(db, { dialect: 'sqlite' });
  let tail: Promise<unknown> = Promise.resolve();
  return {
    store,
    transaction: (body) => {
      const run = tail.then(async () => {
        connection.exec('BEGIN IMMEDIATE');
        try {
          const result = await body({
            insert: async (id) => void connection.prepare('INSERT INTO orders VALUES (?)').run(id),
            idem: store.inTransaction(db),
          });
          connection.exec('COMMIT');
          return result;
        } catch (error) {
          connection.exec('ROLLBACK');
          throw error;
        }
      });
      tail = run.catch(() => {});
      return run;
    },
    orders: async () =>
      (connection.prepare('SELECT id FROM orders ORDER BY id').all() as { id: string }[]).map((r) => r.id),
    close: async () => void connection.close(),
  };
}

/** Run `body` on a fresh host from `make`, closed afterwards whatever happens. */
export async function onHost(make: () => Promise<Host>, body: (host: Host) => Promise<void>): Promise<void> {
  const host = await make();
  try {
    await body(host);
  } finally {
    await host.close();
  }
}
