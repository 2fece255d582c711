import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { afterAll, describe, expect, test } from 'vitest';
import { openDatabase } from '../src/database/open.js';
import { whyUnreachable } from '../src/database/unreachable.js';
import { backends, MYSQL_URL, PG_URL } from './support/databases.js';
import { type ServerProcess, startServerProcess } from './support/process.js';

// A catalog pointed at a database it cannot open says why in one short line per attempt (the database and its
// host, never the CREATE TABLE it was running, a stack or a password), keeps trying, and is ready once the
// database is there. Before: each attempt was a ~4 KB entry (Drizzle's "Failed query: CREATE TABLE …" and two
// stacks) saying only "the database is not reachable; trying again".

const dir = mkdtempSync(join(tmpdir(), 'idem-unreachable-'));
const running = new Set<ServerProcess>();
afterAll(async () => {
  await Promise.all([...running].map((server) => server.stop()));
  rmSync(dir, { recursive: true, force: true });
});

function start(url: string, format: 'json' | 'pretty' = 'json') {
  const server = startServerProcess({
    DATABASE_URL: url,
    WAREHOUSE: join(dir, randomBytes(4).toString('hex')),
    DATABASE_RETRY_MAX_DELAY_MS: '400',
    LOG_FORMAT: format,
    IDEMPOTENCY_PURGE_ENABLED: 'false',
  });
  running.add(server);
  return server;
}

const ready = async (url: string) => (await fetch(`${url}/ready`)).status;

async function untilReady(url: string, timeoutMs = 15_000): Promise<number> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const status = await ready(url);
    if (status === 200 || Date.now() > end) return status;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

interface Server {
  readonly name: string;
  readonly adminUrl: string;
  create(name: string): Promise<void>;
  drop(name: string): Promise<void>;
}

const servers: Server[] = [
  {
    name: 'PostgreSQL',
    adminUrl: PG_URL,
    async create(name) {
      const client = new pg.Client({ connectionString: PG_URL });
      await client.connect();
      await client.query(`CREATE DATABASE ${name}`);
      await client.end();
    },
    async drop(name) {
      const client = new pg.Client({ connectionString: PG_URL });
      await client.connect();
      await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await client.end();
    },
  },
  {
    name: 'MariaDB',
    adminUrl: MYSQL_URL,
    async create(name) {
      const connection = await mysql.createConnection({ uri: MYSQL_URL });
      await connection.query(`CREATE DATABASE ${name}`);
      await connection.end();
    },
    async drop(name) {
      const connection = await mysql.createConnection({ uri: MYSQL_URL });
      await connection.query(`DROP DATABASE IF EXISTS ${name}`);
      await connection.end();
    },
  },
];

for (const server of servers) {
  const backend = backends.find((b) => b.name === server.name);
  const up = backend === undefined ? false : await backend.up();
  describe.skipIf(!up)(`${server.name}: a database that does not exist`, () => {
    test('one short line per attempt naming database and host; not ready; ready once it is created', async () => {
      const name = `does_not_exist_xyz_${randomBytes(4).toString('hex')}`;
      const url = new URL(server.adminUrl);
      url.pathname = `/${name}`;
      const node = start(url.href);
      const address = await node.url;
      const host = `${url.hostname}:${url.port}`;
      const pattern = new RegExp(`database ${name} does not exist on ${host.replace(/\./g, '\\.')}`);
      const attempts = await node.waitFor(pattern, 3);
      for (const line of attempts) {
        const entry = JSON.parse(line);
        expect(entry.msg).toMatch(/\(create it first: .+\); trying again in \d+ ms \(attempt \d+\)$/);
        expect(entry.err).toBeUndefined();
        expect(line.length).toBeLessThan(500);
      }
      const all = [...node.lines, ...node.errors].join('\n');
      expect(all).not.toMatch(/CREATE TABLE|Failed query|^\s+at /m);
      // Once per backoff step: no line but the start line and the attempts.
      expect(node.lines.filter((line) => !pattern.test(line) && !/Server listening/.test(line))).toEqual([]);
      expect(node.lines.find((line) => /Server listening/.test(line))).toMatch(
        /\((opening|not reachable yet)\)/,
      );
      expect(await ready(address)).toBe(503);
      expect(node.child.exitCode).toBeNull();

      // Created while it backs off: the next attempt opens it.
      await server.create(name);
      try {
        expect(await untilReady(address)).toBe(200);
        await node.waitFor(/the database is open/);
        const created = await fetch(`${address}/v1/namespaces`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ namespace: ['late'] }),
        });
        expect(created.status).toBe(200);
      } finally {
        await node.stop();
        await server.drop(name);
      }
    }, 60_000);

    test('pretty: the same, one line each', async () => {
      const name = `does_not_exist_xyz_${randomBytes(4).toString('hex')}`;
      const url = new URL(server.adminUrl);
      url.pathname = `/${name}`;
      const node = start(url.href, 'pretty');
      const attempts = await node.waitFor(/does not exist on/, 2);
      for (const line of attempts) {
        expect(line).toMatch(new RegExp(`WARN: database ${name} does not exist on [^ ]+ \\(create it first`));
        expect(line.length).toBeLessThan(400);
      }
      expect(node.lines.every((line) => /^\[\d\d:\d\d:\d\d\.\d{3}\] (INFO|WARN): /.test(line))).toBe(true);
      await node.stop();
    }, 60_000);
  });
}

describe('each cause in one line, without the SQL, a stack or a password', () => {
  const why = async (url: string) => {
    const error = await openDatabase(url, { acquireTimeoutMs: 3_000 }).then(
      (db) => {
        void db.close();
        throw new Error(`${url} opened`);
      },
      (e: unknown) => e,
    );
    return whyUnreachable(error, url);
  };

  test.each([
    [
      'postgres://nobody:s3cret@127.0.0.1:5432/test',
      /^authentication failed for user nobody on 127\.0\.0\.1:5432/,
    ],
    [
      'mysql://nobody:s3cret@127.0.0.1:3306/test',
      /^authentication failed for user nobody on 127\.0\.0\.1:3306/,
    ],
    [
      'postgres://postgres:s3cret@127.0.0.1:1/test',
      /^connection refused by 127\.0\.0\.1:1 \(is the PostgreSQL/,
    ],
    ['mysql://root:s3cret@127.0.0.1:1/test', /^connection refused by 127\.0\.0\.1:1 \(is the MySQL\/MariaDB/],
    ['postgres://postgres:s3cret@no-such-host.invalid:5432/test', /^unknown host no-such-host\.invalid/],
    ['mysql://root:s3cret@no-such-host.invalid:3306/test', /^unknown host no-such-host\.invalid/],
  ])('%s', async (url, expected) => {
    const line = await why(url);
    expect(line).toMatch(expected);
    expect(line).not.toContain('s3cret');
    expect(line).not.toMatch(/\n|CREATE|Failed query/);
  });

  test('a hostile database name in the URL cannot forge a line', () => {
    const error = Object.assign(new Error('x'), { code: '3D000' });
    const line = whyUnreachable(error, 'postgres://u:pw@127.0.0.1:5432/a%0Aforged%1B%5B31m');
    expect(line.includes('\n') || line.includes('\u001b')).toBe(false);
    expect(line).not.toContain('pw');
  });
});
