import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { IdempotencyStore } from '@idem/core';
import { createRedisStore } from '@idem/store-redis';
import { createSqlStore } from '@idem/store-sql';
import Database from 'better-sqlite3';
import { drizzle as sqliteDrizzle } from 'drizzle-orm/better-sqlite3';
import { drizzle as mysqlDrizzle } from 'drizzle-orm/mysql2';
import { drizzle as pgDrizzle } from 'drizzle-orm/node-postgres';
import { Cluster, Redis } from 'ioredis';
import mysql from 'mysql2/promise';
import pg from 'pg';

export const PG_URL = process.env.PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
export const MYSQL_URL = process.env.MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/test';
export const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
export const CLUSTER_NODES = (
  process.env.REDIS_CLUSTER_NODES ?? '127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003'
)
  .split(',')
  .map((node) => {
    const [host = '127.0.0.1', port = '6379'] = node.split(':');
    return { host, port: Number(port) };
  });

/** Whether a service answers; under CI=true a missing one fails the suite, never skips it. */
export async function available(name: string, probe: () => Promise<unknown>): Promise<boolean> {
  try {
    await probe();
    return true;
  } catch (error) {
    const reason = `${name} is not reachable (${(error as Error).message})`;
    if (process.env.CI === 'true') throw new Error(`${reason}; under CI=true every suite must run`);
    console.warn(`skipping the ${name} suite: ${reason}`);
    return false;
  }
}

/** One backend of the matrix: the URL the command is given, and the library's own store over the same data. */
export interface Backend {
  readonly name: string;
  /** The URL for `idem`; `urlWithPassword` adds a password the server does not check (where one exists). */
  readonly url: string;
  /** Extra arguments every command needs (`--prefix` for Redis). */
  readonly args: readonly string[];
  /** Whether Redis deletes expired records itself, so none can be seeded. */
  readonly nativeExpiry: boolean;
  /** The library's store over the same backend (after `idem migrate` for SQL). */
  store(): Promise<IdempotencyStore>;
  dispose(): Promise<void>;
}

const suffix = () => randomBytes(5).toString('hex');

/** A SQLite file that does not exist yet. */
export function sqliteBackend(): Backend {
  const dir = mkdtempSync(join(tmpdir(), 'idem-cli-'));
  const file = join(dir, 'records.db');
  let connection: Database.Database | undefined;
  return {
    name: 'SQLite file',
    url: `sqlite:${file}`,
    args: [],
    nativeExpiry: false,
    async store() {
      connection ??= new Database(file, { fileMustExist: true });
      return createSqlStore(sqliteDrizzle(connection), { dialect: 'sqlite' });
    },
    async dispose() {
      connection?.close();
      if (existsSync(dir)) rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A PostgreSQL database created empty for the suite, and dropped after it. */
export async function postgresBackend(): Promise<Backend> {
  const name = `idem_cli_${suffix()}`;
  const admin = new pg.Client({ connectionString: PG_URL });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(PG_URL);
  url.pathname = `/${name}`;
  let pool: pg.Pool | undefined;
  return {
    name: 'PostgreSQL',
    url: url.href,
    args: [],
    nativeExpiry: false,
    async store() {
      pool ??= new pg.Pool({ connectionString: url.href, max: 2 });
      return createSqlStore(pgDrizzle(pool), { dialect: 'postgres' });
    },
    async dispose() {
      await pool?.end();
      const again = new pg.Client({ connectionString: PG_URL });
      await again.connect();
      await again.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await again.end();
    },
  };
}

/** A MariaDB/MySQL database created empty for the suite, and dropped after it. */
export async function mysqlBackend(): Promise<Backend> {
  const name = `idem_cli_${suffix()}`;
  const admin = await mysql.createConnection({ uri: MYSQL_URL });
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(MYSQL_URL);
  url.pathname = `/${name}`;
  let pool: mysql.Pool | undefined;
  return {
    name: 'MariaDB',
    url: url.href,
    args: [],
    nativeExpiry: false,
    async store() {
      pool ??= mysql.createPool({ uri: url.href, connectionLimit: 2 });
      return createSqlStore(mysqlDrizzle(pool), { dialect: 'mysql' });
    },
    async dispose() {
      await pool?.end();
      const again = await mysql.createConnection({ uri: MYSQL_URL });
      await again.query(`DROP DATABASE IF EXISTS ${name}`);
      await again.end();
    },
  };
}

/** Redis, standalone or Cluster, under a prefix of the suite's own, swept after it. */
export function redisBackend(cluster: boolean): Backend {
  const prefix = `idem-cli:${suffix()}:`;
  let client: Redis | Cluster | undefined;
  const open = () => (cluster ? new Cluster(CLUSTER_NODES) : new Redis(REDIS_URL));
  return {
    name: cluster ? 'Redis Cluster' : 'Redis',
    url: cluster ? `redis+cluster://${CLUSTER_NODES.map((n) => `${n.host}:${n.port}`).join(',')}` : REDIS_URL,
    args: ['--prefix', prefix],
    nativeExpiry: true,
    async store() {
      client ??= open();
      return createRedisStore(client, { prefix });
    },
    async dispose() {
      const nodes = client instanceof Cluster ? client.nodes('master') : client === undefined ? [] : [client];
      for (const node of nodes) {
        // One DEL per key: on a Cluster node, keys of different slots cannot go in one command.
        for (const key of await node.keys(`${prefix}*`)) await node.del(key);
      }
      client?.disconnect();
    },
  };
}
