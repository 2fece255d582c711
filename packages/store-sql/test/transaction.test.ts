import { randomUUID } from 'node:crypto';
import type { StoredResponse } from '@idem/core';
import { createSqlStore, ensureSchema } from '@idem/store-sql';
import Database from 'better-sqlite3';
import { sql } from 'drizzle-orm';
import { drizzle as sqliteDrizzle } from 'drizzle-orm/better-sqlite3';
import { v7 } from 'uuid';
import { describe, expect, test } from 'vitest';
import { mysqlUp, pgUp } from './support/backends.js';
import { mysqlHost, onHost, postgresHost } from './support/hosts.js';
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
  test('the mutation and the record commit together; a lost reservation rolls the mutation back', () =>
    onHost(postgresHost, async ({ store, transaction, orders }) => {
      const won = reserveParams(v7());
      await store.reserve(won);
      await transaction(async (tx) => {
        await tx.insert('first');
        expect(await tx.idem.finalize({ ...won, response, nowMs })).toBe(true);
        // Not visible outside the transaction until it commits.
        expect((await store.load(won))?.response).toBeNull();
      });
      expect((await store.load(won))?.response?.status).toBe(201);

      const lost = reserveParams(v7());
      await store.reserve(lost);
      await store.reserve({ ...lost, owner: randomUUID(), nowMs: lost.leaseUntilMs }); // someone took over
      await expect(
        transaction(async (tx) => {
          await tx.insert('second');
          if (!(await tx.idem.finalize({ ...lost, response, nowMs }))) throw new RolledBack();
        }),
      ).rejects.toThrow(RolledBack);
      expect(await orders()).toEqual(['first']);
    }));
});

describe.runIf(await mysqlUp())('MariaDB: finalize inside the caller transaction', () => {
  test('the mutation and the record commit together; a lost reservation rolls the mutation back', () =>
    onHost(mysqlHost, async ({ store, transaction, orders }) => {
      const won = reserveParams(v7());
      await store.reserve(won);
      await transaction(async (tx) => {
        await tx.insert('first');
        expect(await tx.idem.finalize({ ...won, response, nowMs })).toBe(true);
      });
      expect((await store.load(won))?.response?.status).toBe(201);
      const lost = reserveParams(v7());
      await store.reserve(lost);
      await store.release(lost);
      await expect(
        transaction(async (tx) => {
          await tx.insert('second');
          if (!(await tx.idem.finalize({ ...lost, response, nowMs }))) throw new RolledBack();
        }),
      ).rejects.toThrow(RolledBack);
      expect(await orders()).toEqual(['first']);
    }));
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

  test('load answers synchronously, a record or undefined; a failure is a rejected promise', async () => {
    const connection = new Database(':memory:');
    const db = sqliteDrizzle(connection);
    await ensureSchema(db, { dialect: 'sqlite' });
    const store = createSqlStore(db, { dialect: 'sqlite' });
    const params = reserveParams(v7());
    await store.reserve(params);
    await store.finalize({ ...params, response, nowMs });
    const read = store.load(params);
    expect(read).not.toBeInstanceOf(Promise);
    expect((read as Awaited<typeof read>)?.response?.status).toBe(201);
    expect(store.load(reserveParams(v7()))).toBeUndefined();
    // A key the table cannot hold, and a closed connection: neither throws, each rejects.
    const refused = store.load({ scope: 'tx', key: 'k'.repeat(10_000) });
    await expect(refused).rejects.toThrow();
    connection.close();
    const closed = store.load(params);
    await expect(closed).rejects.toThrow();
  });
});
