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

/** A database of the tests' (or a benchmark's) own: its URL, and `drop` to remove it. */
export interface FreshDatabase {
  readonly url: string;
  drop(): Promise<void>;
}

/** Run one statement on PostgreSQL over a connection of its own. */
async function onPostgres(statement: string): Promise<void> {
  const client = new pg.Client({ connectionString: PG_URL });
  await client.connect();
  try {
    await client.query(statement);
  } finally {
    await client.end();
  }
}

/** Run one statement on MariaDB/MySQL over a connection of its own. */
async function onMysql(statement: string): Promise<void> {
  const connection = await mysql.createConnection({ uri: MYSQL_URL });
  try {
    await connection.query(statement);
  } finally {
    await connection.end();
  }
}

/** A database of its own on the server at `serverUrl`, so that runs never meet. */
async function freshDatabase(
  serverUrl: string,
  run: (statement: string) => Promise<void>,
  dropStatement: (name: string) => string,
): Promise<FreshDatabase> {
  const name = `ref_${randomBytes(5).toString('hex')}`;
  await run(`CREATE DATABASE ${name}`);
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return { url: url.href, drop: () => run(dropStatement(name)) };
}

/** A database of its own on PostgreSQL (the tests' and the benchmarks'); `drop` ends its sessions too. */
export const freshPostgres = (): Promise<FreshDatabase> =>
  freshDatabase(PG_URL, onPostgres, (name) => `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);

const freshMysql = (): Promise<FreshDatabase> =>
  freshDatabase(MYSQL_URL, onMysql, (name) => `DROP DATABASE IF EXISTS ${name}`);

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

/** An in-memory SQLite catalog, shaped as a backend (always up; nothing to drop). */
export const inMemorySqlite = {
  name: 'SQLite',
  up: async () => true,
  fresh: async (): Promise<FreshDatabase> => ({ url: 'sqlite::memory:', drop: async () => {} }),
};

/** Every database the catalog runs on: SQLite in memory, then the server databases. */
export const everyDatabase = [inMemorySqlite, ...backends];
