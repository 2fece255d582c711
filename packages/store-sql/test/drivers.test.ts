import { createSqlStore, ensureSchema, sqlRows, sqlRun } from '@idem/store-sql';
import Database from 'better-sqlite3';
import { sql } from 'drizzle-orm';
import { drizzle as sqliteDrizzle } from 'drizzle-orm/better-sqlite3';
import { drizzle as pgProxy } from 'drizzle-orm/pg-proxy';
import { describe, expect, test } from 'vitest';

describe('drivers are recognised explicitly', () => {
  test('a Drizzle database of an unsupported driver is refused at creation with the supported list', () => {
    const proxy = pgProxy(async () => ({ rows: [] }));
    expect(() => createSqlStore(proxy, { dialect: 'postgres' })).toThrow(
      /does not support this database \(a Drizzle PgRemoteSession\): supported drivers are node-postgres .*postgres-js.*mysql2.*better-sqlite3/,
    );
  });

  test('something that is not a Drizzle database is refused the same way', () => {
    expect(() => createSqlStore({} as never, { dialect: 'postgres' })).toThrow(
      /does not support this database/,
    );
  });

  test('a dialect that does not match the driver is refused', () => {
    const db = sqliteDrizzle(new Database(':memory:'));
    expect(() => createSqlStore(db as never, { dialect: 'postgres' })).toThrow(
      /dialect 'postgres' was given a better-sqlite3 database, which speaks sqlite/,
    );
  });

  test('sqlRows and sqlRun work on a database and inside its transaction', async () => {
    const db = sqliteDrizzle(new Database(':memory:'));
    await ensureSchema(db, { dialect: 'sqlite' });
    await sqlRun(db, sql`CREATE TABLE t (x integer)`);
    expect(await sqlRun(db, sql`INSERT INTO t VALUES (1), (2)`)).toBe(2);
    expect(await sqlRows(db, sql`SELECT x FROM t ORDER BY x`)).toEqual([{ x: 1 }, { x: 2 }]);
    db.transaction((tx) => {
      expect(
        createSqlStore(db, { dialect: 'sqlite' })
          .inTransaction(tx)
          .finalize({
            scope: 's',
            key: 'k',
            owner: 'o',
            nowMs: 1,
            response: { status: 200, headers: {}, body: null },
          }),
      ).toBe(false);
    });
  });
});
