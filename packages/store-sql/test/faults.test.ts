import { createIdempotency, ErrorCode } from '@idem/core';
import { createSqlStore } from '@idem/store-sql';
import { drizzle as pgDrizzle } from 'drizzle-orm/node-postgres';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { v7 } from 'uuid';
import { describe, expect, test } from 'vitest';
import { MYSQL_URL, mysqlTable, mysqlUp, PG_URL, pgTable, pgUp } from './support/backends.js';
import { reserveParamsIn } from './support/params.js';

const reserveParams = (key: string) => reserveParamsIn('faults', key);

/**
 * Block a store call on a row lock held by a second connection, kill the store's backend connection while it
 * waits, and check that the call fails, the coordinator answers 503, and the pool's next call succeeds.
 */
describe.runIf(await pgUp())('PostgreSQL: a backend killed mid-call', () => {
  test('pg_terminate_backend surfaces as an error; the next call on the same pool succeeds', async () => {
    const { table, pool, store, drop } = await pgTable(1);
    pool.on('error', () => {}); // the idle client of a killed backend reports here; the pool drops it
    const locker = new pg.Client({ connectionString: PG_URL });
    await locker.connect();
    try {
      const key = v7();
      const reserved = reserveParams(key);
      await store.reserve(reserved);
      const { rows } = await pool.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
      const pid = rows[0]?.pid;
      await locker.query('BEGIN');
      await locker.query(`SELECT 1 FROM ${table} WHERE idem_key = $1 FOR UPDATE`, [key]);
      // A fenced write waits for the row lock (a reserve of a busy key reads without locking, and would not).
      const blocked = Promise.resolve(
        store.renewLease({ ...reserved, leaseUntilMs: reserved.leaseUntilMs + 1 }),
      ).then(
        () => undefined,
        (error: unknown) => error,
      );
      await new Promise((resolve) => setTimeout(resolve, 200));
      await new pg.Client({ connectionString: PG_URL }).connect().then(async (killer) => {
        await killer.query('SELECT pg_terminate_backend($1)', [pid]);
        await killer.end();
      });
      expect(await blocked).toBeInstanceOf(Error);
      await locker.query('ROLLBACK');
      expect((await store.reserve(reserveParams(key))).outcome).toBe('exists');
      expect((await store.load({ scope: 'faults', key }))?.fingerprint).toBe('f');
    } finally {
      await locker.end();
      await drop();
    }
  });

  test('the coordinator answers 503 with Retry-After when the database is unreachable', async () => {
    const pool = new pg.Pool({
      connectionString: 'postgres://postgres@127.0.0.1:1/none',
      connectionTimeoutMillis: 500,
    });
    const idem = createIdempotency({
      store: createSqlStore(pgDrizzle(pool), { dialect: 'postgres' }),
      heartbeatIntervalMs: false,
    });
    const result = await idem.begin({
      method: 'POST',
      route: '/x',
      key: v7(),
    });
    expect(
      result.action === 'reject' && [result.error.status, result.error.code, result.error.headers],
    ).toEqual([503, ErrorCode.StoreUnavailable, { 'retry-after': '1' }]);
    await pool.end();
  });
});

describe.runIf(await mysqlUp())('MariaDB: a connection killed mid-call', () => {
  test('KILL surfaces as an error; the next call on the same pool succeeds', async () => {
    const { table, pool, store, drop } = await mysqlTable(1);
    const locker = await mysql.createConnection({ uri: MYSQL_URL });
    try {
      const key = v7();
      await store.reserve(reserveParams(key));
      const [[row]] = (await pool.query('SELECT CONNECTION_ID() AS id')) as unknown as [[{ id: number }]];
      await locker.query('START TRANSACTION');
      await locker.query(`SELECT 1 FROM ${table} WHERE idem_key = ? FOR UPDATE`, [key]);
      const blocked = Promise.resolve(store.reserve(reserveParams(key))).then(
        () => undefined,
        (error: unknown) => error,
      );
      await new Promise((resolve) => setTimeout(resolve, 200));
      const killer = await mysql.createConnection({ uri: MYSQL_URL });
      await killer.query(`KILL ${row.id}`);
      await killer.end();
      expect(await blocked).toBeInstanceOf(Error);
      await locker.query('ROLLBACK');
      expect((await store.reserve(reserveParams(key))).outcome).toBe('exists');
    } finally {
      await locker.end();
      await drop();
    }
  });
});
