import { randomUUID } from 'node:crypto';
import { createSqlStore, ensureSchema, SqlStoreLimitError } from '@idem/store-sql';
import { sql } from 'drizzle-orm';
import { drizzle as mysqlDrizzle } from 'drizzle-orm/mysql2';
import mysql from 'mysql2/promise';
import { describe, expect, test } from 'vitest';
import { MYSQL_URL, makeSqliteMemoryStore, mysqlUp, uniqueTable } from './support/backends.js';

const nowMs = Date.UTC(2030, 0, 1);
const params = (overrides: { scope?: string; key?: string; fingerprint?: string } = {}) => ({
  scope: 's',
  key: randomUUID(),
  fingerprint: 'f',
  owner: randomUUID(),
  nowMs,
  leaseUntilMs: nowMs + 1_000,
  expiresAtMs: nowMs + 2_000,
  ...overrides,
});

describe('values the table cannot hold are refused, never truncated', () => {
  test.each([
    ['a scope over 255 characters', { scope: 's'.repeat(256) }, /scope has 256 characters/],
    ['a key over 255 characters', { key: 'k'.repeat(300) }, /key has 300 characters/],
    ['a fingerprint over 255 characters', { fingerprint: 'f'.repeat(256) }, /fingerprint has 256/],
  ])('%s', async (_, overrides, message) => {
    const { store, cleanup } = await makeSqliteMemoryStore();
    const p = params(overrides);
    await expect(store.reserve(p)).rejects.toThrow(SqlStoreLimitError);
    await expect(store.reserve(p)).rejects.toThrow(message);
    expect(await store.purgeExpired({ beforeMs: Number.MAX_SAFE_INTEGER, limit: 10 })).toBe(0);
    await cleanup?.();
  });

  test('exactly 255 characters fit', async () => {
    const { store, cleanup } = await makeSqliteMemoryStore();
    const p = params({ scope: 'é'.repeat(255), key: 'k'.repeat(255) });
    expect((await store.reserve(p)).outcome).toBe('reserved');
    expect((await store.load(p))?.scope).toBe('é'.repeat(255));
    await cleanup?.();
  });

  test('a body over maxBodyBytes is refused and the reservation stays in flight', async () => {
    const { store: base, cleanup } = await makeSqliteMemoryStore();
    void base;
    const Database = (await import('better-sqlite3')).default;
    const { drizzle } = await import('drizzle-orm/better-sqlite3');
    const db = drizzle(new Database(':memory:'));
    await ensureSchema(db, { dialect: 'sqlite' });
    const store = createSqlStore(db, { dialect: 'sqlite', maxBodyBytes: 10 });
    const p = params();
    await store.reserve(p);
    const response = { status: 200, headers: {}, body: new Uint8Array(11) };
    await expect(store.finalize({ ...p, response })).rejects.toThrow(/11 bytes; this store holds at most 10/);
    expect((await store.load(p))?.response).toBeNull();
    await cleanup?.();
  });

  test('an unsafe table name is refused before any SQL runs', () => {
    expect(() => createSqlStore({} as never, { dialect: 'sqlite', table: 'x; DROP TABLE y' })).toThrow(
      TypeError,
    );
  });
});

describe.runIf(await mysqlUp())('MariaDB keeps keys exact', () => {
  test('keys differing only in case, accents or trailing space are different records', async () => {
    const table = uniqueTable();
    const pool = mysql.createPool({ uri: MYSQL_URL, connectionLimit: 2 });
    const db = mysqlDrizzle(pool);
    await ensureSchema(db, { dialect: 'mysql', table });
    const store = createSqlStore(db, { dialect: 'mysql', table });
    try {
      for (const key of ['Key-a', 'key-a', 'kéy-a', 'key-a ']) {
        expect((await store.reserve(params({ key }))).outcome, key).toBe('reserved');
      }
    } finally {
      await db.execute(sql`DROP TABLE IF EXISTS ${sql.identifier(table)}`);
      await pool.end();
    }
  });
});
