import { connect } from 'node:net';
import { IdemError } from '@idem/core';
import Database from 'better-sqlite3';
import { sql } from 'drizzle-orm';
import { drizzle as sqliteDrizzle } from 'drizzle-orm/better-sqlite3';
import { drizzle as mysqlDrizzle } from 'drizzle-orm/mysql2';
import { drizzle as pgDrizzle } from 'drizzle-orm/node-postgres';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { toIcebergError } from '../src/http/errors.js';
import { backends, MYSQL_URL, PG_URL } from './support/databases.js';
import { call, type Node, startNode } from './support/server.js';

/** The error a promise rejects with. */
async function thrown(run: () => Promise<unknown>): Promise<unknown> {
  try {
    await run();
  } catch (error) {
    return error;
  }
  throw new Error('expected a failure');
}

const answer = (error: unknown) => {
  const { code, type } = toIcebergError(error);
  return { code, type };
};
const UNAVAILABLE = { code: 503, type: 'ServiceUnavailableException' };
const INTERNAL = { code: 500, type: 'InternalServerError' };

describe('errors are answered by what they are, never "anything else is 503"', () => {
  test('a database that refuses connections, through Drizzle: 503 (pg and mysql2)', async () => {
    const pool = new pg.Pool({ connectionString: 'postgres://postgres@127.0.0.1:1/none' });
    expect(answer(await thrown(() => pgDrizzle(pool).execute(sql`SELECT 1`)))).toEqual(UNAVAILABLE);
    await pool.end();
    const mysqlPool = mysql.createPool({ uri: 'mysql://root@127.0.0.1:1/none' });
    expect(answer(await thrown(() => mysqlDrizzle(mysqlPool).execute(sql`SELECT 1`)))).toEqual(UNAVAILABLE);
    await mysqlPool.end();
  });

  test('SQLite busy (another connection holds the write lock), through Drizzle: 503', async () => {
    const file = `/tmp/idem-busy-${process.pid}.db`;
    const holder = new Database(file);
    holder.exec('CREATE TABLE IF NOT EXISTS t (x)');
    holder.exec('BEGIN IMMEDIATE');
    const waiter = sqliteDrizzle(new Database(file, { timeout: 0 }));
    expect(answer(await thrown(async () => waiter.run(sql`INSERT INTO t VALUES (1)`)))).toEqual(UNAVAILABLE);
    holder.exec('ROLLBACK');
  });

  test('node-postgres errors without a code, a lost mysql2 connection, filesystem input errors', () => {
    expect(answer(new Error('Connection terminated unexpectedly'))).toEqual(UNAVAILABLE);
    expect(answer(Object.assign(new Error('lost'), { fatal: true }))).toEqual(UNAVAILABLE);
    expect(answer(Object.assign(new Error('x'), { code: '57P01' }))).toEqual(UNAVAILABLE);
    expect(answer(Object.assign(new Error('x'), { code: '08006' }))).toEqual(UNAVAILABLE);
    expect(answer(Object.assign(new Error('x'), { code: 'SQLITE_BUSY_SNAPSHOT' }))).toEqual(UNAVAILABLE);
    expect(answer(Object.assign(new Error('x'), { code: '22001' })).code).toBe(400);
    expect(answer(Object.assign(new Error('x'), { code: 'ER_DUP_ENTRY' })).code).toBe(409);
    expect(answer(Object.assign(new Error('x'), { code: 'ENAMETOOLONG' }))).toEqual({
      code: 400,
      type: 'BadRequestException',
    });
    expect(answer(Object.assign(new Error('x'), { code: 'ENOSPC' })).code).toBe(503);
  });

  test('anything unknown is a 500, logged, never a 503: a bug, a syntax error, a permission', () => {
    expect(answer(new Error('boom'))).toEqual(INTERNAL);
    expect(answer(new TypeError('undefined is not a function'))).toEqual(INTERNAL);
    expect(answer(Object.assign(new Error('x'), { code: '42601' }))).toEqual(INTERNAL);
    expect(answer(Object.assign(new Error('x'), { code: 'EACCES' }))).toEqual(INTERNAL);
    expect(answer('a string')).toEqual(INTERNAL);
  });

  test('the idempotency layer: a 400 (reused key, a value the store cannot hold) stays a BadRequestException', () => {
    const limit = Object.assign(new Error('scope too long'), { code: 'IDEMPOTENCY_STORE_LIMIT' });
    expect(answer(limit)).toEqual({ code: 400, type: 'BadRequestException' });
    expect(answer(new IdemError('IDEMPOTENCY_KEY_REUSED', 'reused', { status: 400 }))).toEqual({
      code: 400,
      type: 'BadRequestException',
    });
  });
});

for (const backend of backends) {
  describe.runIf(await backend.up())(`real ${backend.name} errors`, () => {
    test('a terminated session is a 503, a syntax error a 500, a data exception a 400', async () => {
      if (backend.name === 'PostgreSQL') {
        const pool = new pg.Pool({ connectionString: PG_URL, max: 1 });
        pool.on('error', () => {});
        const db = pgDrizzle(pool);
        expect(
          answer(await thrown(() => db.execute(sql`SELECT pg_terminate_backend(pg_backend_pid())`))),
        ).toEqual(UNAVAILABLE);
        expect(answer(await thrown(() => db.execute(sql`SELEC 1`)))).toEqual(INTERNAL);
        const duplicate = await thrown(() => db.execute(sql`SELECT * FROM (VALUES (1)) v(x) WHERE x = 1/0`));
        expect(answer(duplicate).code).toBe(400); // class 22, a data exception
        await pool.end();
      } else {
        const pool = mysql.createPool({ uri: MYSQL_URL, connectionLimit: 1 });
        const db = mysqlDrizzle(pool);
        expect(answer(await thrown(() => db.execute(sql`SELEC 1`)))).toEqual(INTERNAL);
        // Past max_allowed_packet (SQLSTATE 08S01, a "communication error"): the value's fault, never a 503.
        const [row] = (await pool.query('SELECT @@max_allowed_packet AS packet'))[0] as { packet: number }[];
        const big = 'x'.repeat(Number(row?.packet) + 1);
        expect(answer(await thrown(() => db.execute(sql`SELECT ${big} AS x`)))).toEqual({
          code: 400,
          type: 'BadRequestException',
        });
        expect(answer(await thrown(() => db.execute(sql`KILL CONNECTION_ID()`)))).toEqual(UNAVAILABLE);
        await pool.end();
      }
    });
  });
}

describe('over HTTP', () => {
  let node: Node;
  beforeAll(async () => {
    node = await startNode('sqlite::memory:', { REQUEST_TIMEOUT_MS: '300' });
  });
  afterAll(async () => node.close());

  test('a database fault is a 503 with Retry-After; a bug is a 500 without', async () => {
    // A request's reads run on `db.until(its deadline)`: its statements fail.
    const until = node.db.until;
    const failing = (fault: () => Error) => (deadline: number) => ({
      ...until(deadline),
      rows: async () => {
        throw fault();
      },
    });
    try {
      node.db.until = failing(() => Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' }));
      const down = await call(node.url, 'GET', '/v1/namespaces');
      expect(down.status).toBe(503);
      expect(down.headers.get('retry-after')).toBe('1');
      expect(down.text).not.toMatch(/ECONNRESET/);
      node.db.until = failing(() => new TypeError("Cannot read properties of undefined (reading 'x')"));
      const bug = await call(node.url, 'GET', '/v1/namespaces');
      expect(bug.status).toBe(500);
      expect(bug.json().error).toMatchObject({ type: 'InternalServerError', code: 500 });
      expect(bug.headers.get('retry-after')).toBeNull();
      expect(bug.text).not.toMatch(/Cannot read/);
    } finally {
      node.db.until = until;
    }
  });

  test('a client that never finishes its request gets a 408 once REQUEST_TIMEOUT_MS has passed', async () => {
    const { port } = new URL(node.url);
    const socket = connect(Number(port), '127.0.0.1');
    socket.write(
      'POST /v1/namespaces HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"na',
    );
    const started = performance.now();
    const reply = await new Promise<string>((resolve) => {
      let text = '';
      socket.on('data', (chunk) => {
        text += chunk;
      });
      socket.on('close', () => resolve(text));
      setTimeout(() => socket.destroy(), 5_000); // never hang the suite
    });
    expect(reply).toMatch(/^HTTP\/1\.1 408/);
    expect(performance.now() - started).toBeLessThan(3_000);
    expect((await call(node.url, 'GET', '/v1/config')).status).toBe(200);
  });
});
