import {
  createIdempotency,
  type Execution,
  type IdempotencyEvent,
  type TransactionalStore,
} from '@idem/core';
import { createSqlStore, ensureSchema } from '@idem/store-sql';
import Database from 'better-sqlite3';
import { sql } from 'drizzle-orm';
import { drizzle as sqliteDrizzle } from 'drizzle-orm/better-sqlite3';
import { drizzle as mysqlDrizzle } from 'drizzle-orm/mysql2';
import { drizzle as pgDrizzle } from 'drizzle-orm/node-postgres';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { v7 } from 'uuid';
import { describe, expect, test } from 'vitest';
import { MYSQL_URL, mysqlUp, PG_URL, pgUp, uniqueTable } from './support/backends.js';

// reserveIn: 'transaction': the key is reserved, the work done and the record finalized in one transaction of
// the host's; duplicates wait on the row until it ends.

const created = { status: 201, headers: { 'content-type': 'application/json' }, body: '{"id":1}' };
const request = (key: string) => ({ method: 'POST', route: '/orders', path: '/orders', body: { a: 1 }, key });

/** A database the host writes to, with its transaction and its own table of orders. */
interface Host {
  /** Run `body` in a transaction: commit when it resolves, roll back when it throws. */
  transaction<T>(
    body: (tx: { insert(id: string): Promise<void>; idem: TransactionalStore }) => Promise<T>,
    options?: { lockWaitSeconds?: number },
  ): Promise<T>;
  orders(): Promise<string[]>;
  store: ReturnType<typeof createSqlStore>;
  close(): Promise<void>;
}

async function postgresHost(): Promise<Host> {
  const table = uniqueTable();
  const orders = `${table}_orders`;
  const pool = new pg.Pool({ connectionString: PG_URL, max: 6 });
  const db = pgDrizzle(pool);
  await ensureSchema(db, { dialect: 'postgres', table });
  await db.execute(sql`CREATE TABLE ${sql.identifier(orders)} (id text PRIMARY KEY)`);
  const store = createSqlStore(db, { dialect: 'postgres', table });
  return {
    store: store as unknown as Host['store'],
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
    close: async () => {
      await db.execute(sql`DROP TABLE IF EXISTS ${sql.identifier(table)}, ${sql.identifier(orders)}`);
      await pool.end();
    },
  };
}

async function mysqlHost(): Promise<Host> {
  const table = uniqueTable();
  const orders = `${table}_orders`;
  const pool = mysql.createPool({ uri: MYSQL_URL, connectionLimit: 6 });
  const db = mysqlDrizzle(pool);
  await ensureSchema(db, { dialect: 'mysql', table });
  await db.execute(sql`CREATE TABLE ${sql.identifier(orders)} (id varchar(64) PRIMARY KEY)`);
  const store = createSqlStore(db, { dialect: 'mysql', table });
  return {
    store: store as unknown as Host['store'],
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
    close: async () => {
      await db.execute(sql`DROP TABLE IF EXISTS ${sql.identifier(table)}, ${sql.identifier(orders)}`);
      await pool.end();
    },
  };
}

/** SQLite: one connection, transactions opened on it (BEGIN IMMEDIATE) so that async work can run inside. */
async function sqliteHost(): Promise<Host> {
  const connection = new Database(':memory:');
  const db = sqliteDrizzle(connection);
  await ensureSchema(db, { dialect: 'sqlite' });
  connection.exec('CREATE TABLE orders (id text PRIMARY KEY)');
  const store = createSqlStore(db, { dialect: 'sqlite' });
  let tail: Promise<unknown> = Promise.resolve();
  return {
    store: store as unknown as Host['store'],
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

/** The host's handler: reserve, write an order, finalize, all in one transaction; or the answer to send. */
async function handle(
  host: Host,
  execution: Execution,
  order: string,
  options: { failAfterWrite?: boolean } = {},
) {
  return host.transaction(async (tx) => {
    const reservation = await execution.reserveWith(tx.idem);
    if (reservation.action !== 'execute') return reservation.action;
    await tx.insert(order);
    if (options.failAfterWrite) throw new Error('the handler failed');
    expect(await execution.finalizeWith(created, tx.idem)).toBe('finalized');
    return 'executed';
  });
}

const hosts = [
  ['SQLite', sqliteHost, true],
  ['PostgreSQL', postgresHost, await pgUp()],
  ['MariaDB', mysqlHost, await mysqlUp()],
] as const;

for (const [name, makeHost, up] of hosts) {
  describe.runIf(up)(`${name}: reserveIn 'transaction'`, () => {
    test('one transaction reserves, writes and finalizes; the retry replays without running the handler', async () => {
      const host = await makeHost();
      try {
        const idem = createIdempotency({ store: host.store, reserveIn: 'transaction' });
        const key = v7();
        const first = await idem.begin(request(key));
        if (first.action !== 'execute') throw new Error(first.action);
        expect(await handle(host, first.execution, 'o1')).toBe('executed');
        expect(await first.execution.finish(created)).toBe('finalized');
        const retry = await idem.begin(request(key));
        if (retry.action !== 'execute') throw new Error(retry.action);
        expect(await handle(host, retry.execution, 'o1-again')).toBe('replay');
        expect(await host.orders()).toEqual(['o1']);
        expect((await host.store.load({ scope: '', key }))?.response?.status).toBe(201);
      } finally {
        await host.close();
      }
    });

    test('a handler that fails after its write rolls back the reservation with it: the retry executes', async () => {
      const host = await makeHost();
      try {
        const idem = createIdempotency({ store: host.store, reserveIn: 'transaction' });
        const key = v7();
        const first = await idem.begin(request(key));
        if (first.action !== 'execute') throw new Error(first.action);
        await expect(handle(host, first.execution, 'o1', { failAfterWrite: true })).rejects.toThrow('failed');
        expect(await first.execution.finish({ status: 500, headers: {}, body: null })).toBe('released');
        expect(await host.store.load({ scope: '', key })).toBeUndefined();
        const retry = await idem.begin(request(key));
        if (retry.action !== 'execute') throw new Error(retry.action);
        expect(await handle(host, retry.execution, 'o2')).toBe('executed');
        expect(await host.orders()).toEqual(['o2']);
      } finally {
        await host.close();
      }
    });

    test('10 concurrent requests with one key: one executes, every other waits for it and replays', async () => {
      const host = await makeHost();
      try {
        const idem = createIdempotency({ store: host.store, reserveIn: 'transaction' });
        const key = v7();
        const outcomes = await Promise.all(
          Array.from({ length: 10 }, async (_, i) => {
            const begun = await idem.begin(request(key));
            if (begun.action !== 'execute') throw new Error(begun.action);
            return handle(host, begun.execution, `o${i}`);
          }),
        );
        expect(outcomes.filter((o) => o === 'executed')).toHaveLength(1);
        expect(outcomes.filter((o) => o === 'replay')).toHaveLength(9);
        expect(await host.orders()).toHaveLength(1);
      } finally {
        await host.close();
      }
    });

    test('a status the rule releases is removed in the transaction: nothing is left for the retry to meet', async () => {
      const host = await makeHost();
      try {
        const idem = createIdempotency({ store: host.store, reserveIn: 'transaction' });
        const key = v7();
        const first = await idem.begin(request(key));
        if (first.action !== 'execute') throw new Error(first.action);
        await host.transaction(async (tx) => {
          expect((await first.execution.reserveWith(tx.idem)).action).toBe('execute');
          expect(await first.execution.finalizeWith({ status: 503, headers: {}, body: null }, tx.idem)).toBe(
            'not-stored',
          );
        });
        expect(await host.store.load({ scope: '', key })).toBeUndefined();
      } finally {
        await host.close();
      }
    });
  });
}

const rowLocking = hosts.filter(([name]) => name !== 'SQLite');

for (const [name, makeHost, up] of rowLocking) {
  describe.runIf(up)(`${name}: a duplicate that waits on the row longer than the lock wait`, () => {
    test('is told the key is in flight (a conflict event), and the first request still commits', async () => {
      const host = await makeHost();
      try {
        const events: IdempotencyEvent[] = [];
        const idem = createIdempotency({
          store: host.store,
          reserveIn: 'transaction',
          inFlight: { strategy: 'wait', maxWaitMs: 1_000, timeoutStatus: 503 },
          onEvent: (event) => events.push(event),
        });
        const key = v7();
        const [first, duplicate] = [await idem.begin(request(key)), await idem.begin(request(key))];
        if (first.action !== 'execute' || duplicate.action !== 'execute') throw new Error('not pending');
        let release = () => {};
        const held = new Promise<void>((resolve) => {
          release = resolve;
        });
        let reserved = () => {};
        const isReserved = new Promise<void>((resolve) => {
          reserved = resolve;
        });
        const holder = host.transaction(async (tx) => {
          expect((await first.execution.reserveWith(tx.idem)).action).toBe('execute');
          reserved();
          await held;
          await tx.insert('o1');
          return first.execution.finalizeWith(created, tx.idem);
        });
        await isReserved;
        const refused = await host
          .transaction((tx) => duplicate.execution.reserveWith(tx.idem), { lockWaitSeconds: 1 })
          .catch((error: unknown) => error);
        release();
        expect(await holder).toBe('finalized');
        expect(refused).toMatchObject({
          action: 'reject',
          error: { code: 'IDEMPOTENCY_IN_PROGRESS', status: 503 },
        });
        expect(events.filter((e) => e.type === 'conflict')).toMatchObject([{ waited: true, status: 503 }]);
        expect(await duplicate.execution.finish({ status: 503, headers: {}, body: null })).toBe(
          'not-reserved',
        );
        expect(await host.orders()).toEqual(['o1']);
        expect((await host.store.load({ scope: '', key }))?.response?.status).toBe(201);
      } finally {
        await host.close();
      }
    });
  });
}

describe('events of a reservation made in a transaction', () => {
  test('a fault of the store is reported (store-error) and thrown; a rolled-back reservation ends released', async () => {
    const host = await sqliteHost();
    try {
      const events: IdempotencyEvent[] = [];
      const idem = createIdempotency({
        store: host.store,
        reserveIn: 'transaction',
        onEvent: (e) => events.push(e),
      });
      const broken = await idem.begin(request(v7()));
      if (broken.action !== 'execute') throw new Error(broken.action);
      const fault = new Error('connect ECONNREFUSED');
      const failing: TransactionalStore = {
        reserve: () => Promise.reject(fault),
        finalize: () => false,
        release: () => false,
      };
      await expect(broken.execution.reserveWith(failing)).rejects.toBe(fault);
      expect(events.at(-1)).toMatchObject({
        type: 'store-error',
        operation: 'reserve',
        failedOpen: false,
        error: fault,
      });

      const rolledBack = await idem.begin(request(v7()));
      if (rolledBack.action !== 'execute') throw new Error(rolledBack.action);
      await expect(handle(host, rolledBack.execution, 'o1', { failAfterWrite: true })).rejects.toThrow(
        'failed',
      );
      expect(await rolledBack.execution.finish({ status: 500, headers: {}, body: null })).toBe('released');
      expect(events.at(-1)).toMatchObject({
        type: 'released',
        reason: 'status',
        status: 500,
        owner: rolledBack.execution.owner,
      });
    } finally {
      await host.close();
    }
  });
});
