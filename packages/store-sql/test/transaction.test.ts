import { randomUUID } from 'node:crypto';
import type { StoredResponse } from '@idem/core';
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
import { reserveParamsIn } from './support/params.js';

const nowMs = Date.UTC(2030, 0, 1);
const response: StoredResponse = {
  status: 201,
  headers: { location: '/orders/1' },
  body: Buffer.from('{"id":1}'),
};
const reserveParams = (key: string) => reserveParamsIn('tx', key);

class RolledBack extends Error {}

// The host's own table, written in the same transaction as the record.
describe.runIf(await pgUp())('PostgreSQL: finalize inside the caller transaction', () => {
  test('the mutation and the record commit together; a lost reservation rolls the mutation back', async () => {
    const table = uniqueTable();
    const orders = `${table}_orders`;
    const pool = new pg.Pool({ connectionString: PG_URL, max: 3 });
    const db = pgDrizzle(pool);
    await ensureSchema(db, { dialect: 'postgres', table });
    await db.execute(sql`CREATE TABLE ${sql.identifier(orders)} (id text PRIMARY KEY)`);
    const store = createSqlStore(db, { dialect: 'postgres', table });
    try {
      const won = reserveParams(v7());
      await store.reserve(won);
      await db.transaction(async (tx) => {
        await tx.execute(sql`INSERT INTO ${sql.identifier(orders)} VALUES ('first')`);
        expect(await store.inTransaction(tx).finalize({ ...won, response, nowMs })).toBe(true);
        // Not visible outside the transaction until it commits.
        expect((await store.load(won))?.response).toBeNull();
      });
      expect((await store.load(won))?.response?.status).toBe(201);

      const lost = reserveParams(v7());
      await store.reserve(lost);
      await store.reserve({ ...lost, owner: randomUUID(), nowMs: lost.leaseUntilMs }); // someone took over
      await expect(
        db.transaction(async (tx) => {
          await tx.execute(sql`INSERT INTO ${sql.identifier(orders)} VALUES ('second')`);
          if (!(await store.inTransaction(tx).finalize({ ...lost, response, nowMs }))) throw new RolledBack();
        }),
      ).rejects.toThrow(RolledBack);
      const { rows } = await pool.query(`SELECT id FROM ${orders} ORDER BY id`);
      expect(rows).toEqual([{ id: 'first' }]);
    } finally {
      await db.execute(sql`DROP TABLE IF EXISTS ${sql.identifier(table)}, ${sql.identifier(orders)}`);
      await pool.end();
    }
  });
});

describe.runIf(await mysqlUp())('MariaDB: finalize inside the caller transaction', () => {
  test('the mutation and the record commit together; a lost reservation rolls the mutation back', async () => {
    const table = uniqueTable();
    const orders = `${table}_orders`;
    const pool = mysql.createPool({ uri: MYSQL_URL, connectionLimit: 3 });
    const db = mysqlDrizzle(pool);
    await ensureSchema(db, { dialect: 'mysql', table });
    await db.execute(sql`CREATE TABLE ${sql.identifier(orders)} (id varchar(20) PRIMARY KEY)`);
    const store = createSqlStore(db, { dialect: 'mysql', table });
    try {
      const won = reserveParams(v7());
      await store.reserve(won);
      await db.transaction(async (tx) => {
        await tx.execute(sql`INSERT INTO ${sql.identifier(orders)} VALUES ('first')`);
        expect(await store.inTransaction(tx).finalize({ ...won, response, nowMs })).toBe(true);
      });
      expect((await store.load(won))?.response?.status).toBe(201);
      const lost = reserveParams(v7());
      await store.reserve(lost);
      await store.release(lost);
      await expect(
        db.transaction(async (tx) => {
          await tx.execute(sql`INSERT INTO ${sql.identifier(orders)} VALUES ('second')`);
          if (!(await store.inTransaction(tx).finalize({ ...lost, response, nowMs }))) throw new RolledBack();
        }),
      ).rejects.toThrow(RolledBack);
      const [rows] = await pool.query(`SELECT id FROM ${orders} ORDER BY id`);
      expect(rows).toEqual([{ id: 'first' }]);
    } finally {
      await db.execute(sql`DROP TABLE IF EXISTS ${sql.identifier(table)}, ${sql.identifier(orders)}`);
      await pool.end();
    }
  });
});

describe('SQLite: finalize inside the caller (synchronous) transaction', () => {
  test('returns a boolean synchronously; a lost reservation rolls the mutation back', async () => {
    const connection = new Database(':memory:');
    const db = sqliteDrizzle(connection);
    await ensureSchema(db, { dialect: 'sqlite' });
    connection.exec('CREATE TABLE orders (id text PRIMARY KEY)');
    const store = createSqlStore(db, { dialect: 'sqlite' });
    const won = reserveParams(v7());
    await store.reserve(won);
    db.transaction((tx) => {
      tx.run(sql`INSERT INTO orders VALUES ('first')`);
      expect(store.inTransaction(tx).finalize({ ...won, response, nowMs })).toBe(true);
    });
    const lost = reserveParams(v7());
    expect(() =>
      db.transaction((tx) => {
        tx.run(sql`INSERT INTO orders VALUES ('second')`);
        if (!store.inTransaction(tx).finalize({ ...lost, response, nowMs })) throw new RolledBack();
      }),
    ).toThrow(RolledBack);
    expect(connection.prepare('SELECT id FROM orders').all()).toEqual([{ id: 'first' }]);
    expect((await store.load(won))?.response?.headers).toEqual({ location: '/orders/1' });
    connection.close();
  });
});
