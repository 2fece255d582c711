import { randomBytes } from 'node:crypto';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { whyUnreachable } from '../../src/database/unreachable.js';

export const PG_URL = process.env.PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
export const MYSQL_URL = process.env.MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/test';

async function available(name: string, url: string, probe: () => Promise<unknown>): Promise<boolean> {
  try {
    await probe();
    return true;
  } catch (error) {
    // What is wrong, in one line: a database that does not exist is not a server that is down.
    const why = whyUnreachable(error, url);
    if (process.env.CI === 'true') throw new Error(`${name} cannot be used under CI=true: ${why}`);
    console.warn(`skipping the ${name} suites: ${why}`);
    return false;
  }
}

/** A database of its own on the server, so that runs never meet; returns its URL and a cleanup. */
export async function freshPostgres(): Promise<{ url: string; drop(): Promise<void> }> {
  const name = `ref_${randomBytes(5).toString('hex')}`;
  const admin = new pg.Client({ connectionString: PG_URL });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(PG_URL);
  url.pathname = `/${name}`;
  return {
    url: url.href,
    async drop() {
      const client = new pg.Client({ connectionString: PG_URL });
      await client.connect();
      await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await client.end();
    },
  };
}

async function freshMysql(): Promise<{ url: string; drop(): Promise<void> }> {
  const name = `ref_${randomBytes(5).toString('hex')}`;
  const admin = await mysql.createConnection({ uri: MYSQL_URL });
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(MYSQL_URL);
  url.pathname = `/${name}`;
  return {
    url: url.href,
    async drop() {
      const connection = await mysql.createConnection({ uri: MYSQL_URL });
      await connection.query(`DROP DATABASE IF EXISTS ${name}`);
      await connection.end();
    },
  };
}

/** The server databases the multi-node suites run on; each `up()` skips with a reason, or fails under CI=true. */
export const backends = [
  {
    name: 'PostgreSQL',
    up: () =>
      available('PostgreSQL', PG_URL, () =>
        new pg.Client({ connectionString: PG_URL }).connect().then((c) => c.end()),
      ),
    fresh: freshPostgres,
  },
  {
    name: 'MariaDB',
    up: () =>
      available('MariaDB', MYSQL_URL, () => mysql.createConnection({ uri: MYSQL_URL }).then((c) => c.end())),
    fresh: freshMysql,
  },
];
