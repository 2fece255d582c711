import { existsSync } from 'node:fs';
import type { IdempotencyStore } from '@idem/core';
import { Redis } from 'ioredis';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  available,
  type Backend,
  CLUSTER_NODES,
  MYSQL_URL,
  mysqlBackend,
  PG_URL,
  postgresBackend,
  REDIS_URL,
  redisBackend,
  sqliteBackend,
} from './support/backends.js';
import { idem, type Ran } from './support/run.js';

const json = (ran: Ran) => {
  expect(ran.stderr, ran.stderr).not.toMatch(/\n\s+at /);
  return JSON.parse(ran.stdout);
};

/** A failure is one line on stderr, no stack trace, and a non-zero exit. */
function expectOneLine(ran: Ran, code: number, pattern: RegExp) {
  expect(ran.code, `${ran.stdout}${ran.stderr}`).toBe(code);
  expect(ran.stderr.trim().split('\n')).toHaveLength(1);
  expect(ran.stderr).toMatch(pattern);
  expect(ran.stderr).not.toMatch(/\bat .*\.(js|ts):\d+/);
}

const KEY_DONE = '0190a2b4-0000-7000-8000-00000000d0e1';
const KEY_STUCK = '0190a2b4-0000-7000-8000-0000000057c4';
const KEY_RUNNING = '0190a2b4-0000-7000-8000-000000000a11';
const KEY_OLD = '0190a2b4-0000-7000-8000-000000000e3d';
const SCOPE = 'alice';
const BODY = '{"namespace":["accounting"],"properties":{"owner":"alice"}}';

/** The records every backend starts from, written through the library: done, stuck, running and (SQL) expired. */
async function seed(store: IdempotencyStore, withExpired: boolean) {
  const now = Date.now();
  const reserve = (key: string, createdMs: number, leaseMs: number, expiresMs: number) =>
    store.reserve({
      scope: SCOPE,
      key,
      fingerprint: 'f'.repeat(64),
      owner: `owner-${key.slice(-4)}`,
      nowMs: createdMs,
      leaseUntilMs: leaseMs,
      expiresAtMs: expiresMs,
    });
  await reserve(KEY_DONE, now - 1000, now + 30_000, now + 3_600_000);
  const stored = await store.finalize({
    scope: SCOPE,
    key: KEY_DONE,
    owner: `owner-${KEY_DONE.slice(-4)}`,
    nowMs: now,
    response: {
      status: 200,
      headers: { 'content-type': 'application/json' },
      body: new TextEncoder().encode(BODY),
    },
  });
  expect(stored).toBe(true);
  await reserve(KEY_STUCK, now - 600_000, now - 300_000, now + 3_600_000); // its lease lapsed 5 min ago
  await reserve(KEY_RUNNING, now - 500, now + 30_000, now + 3_600_000);
  if (withExpired) {
    await reserve(KEY_OLD, now - 7_200_000, now - 7_000_000, now - 3_600_000);
  }
}

const matrix: [string, () => Promise<boolean>, () => Backend | Promise<Backend>][] = [
  ['SQLite file', async () => true, sqliteBackend],
  [
    'PostgreSQL',
    () =>
      available('PostgreSQL', async () => {
        const client = new pg.Client({ connectionString: PG_URL, connectionTimeoutMillis: 3_000 });
        await client.connect();
        await client.end();
      }),
    postgresBackend,
  ],
  [
    'MariaDB',
    () =>
      available('MariaDB', async () =>
        (await mysql.createConnection({ uri: MYSQL_URL, connectTimeout: 3_000 })).end(),
      ),
    mysqlBackend,
  ],
  [
    'Redis',
    () =>
      available('Redis', async () => {
        const client = new Redis(REDIS_URL, { maxRetriesPerRequest: 0, retryStrategy: () => null });
        try {
          await client.ping();
        } finally {
          client.disconnect();
        }
      }),
    () => redisBackend(false),
  ],
  [
    'Redis Cluster',
    () =>
      available('Redis Cluster', async () => {
        for (const { host, port } of CLUSTER_NODES) {
          const node = new Redis({ host, port, maxRetriesPerRequest: 0, retryStrategy: () => null });
          try {
            if (!String(await node.cluster('INFO')).includes('cluster_state:ok'))
              throw new Error(`${host}:${port} is not in a healthy cluster`);
          } finally {
            node.disconnect();
          }
        }
      }),
    () => redisBackend(true),
  ],
];

for (const [name, up, make] of matrix) {
  describe.runIf(await up())(`idem on ${name}`, () => {
    let backend: Backend;
    let store: IdempotencyStore;
    const run = (command: string, ...args: string[]) =>
      idem([command, backend.url, ...backend.args, ...args]);

    beforeAll(async () => {
      backend = await make();
    });
    afterAll(async () => {
      await store?.close?.();
      await backend?.dispose();
    });

    test('migrate creates the schema in an empty database, and a second run changes nothing', async () => {
      const first = await run('migrate', '--json');
      expect(first.code, first.stderr).toBe(0);
      const again = await run('migrate');
      expect(again.code, again.stderr).toBe(0);
      if (backend.nativeExpiry) {
        expect(json(first)).toMatchObject({ migrated: false });
        expect(again.stdout).toMatch(/needs no schema/);
      } else {
        expect(json(first)).toMatchObject({ migrated: true, table: 'idem_records', result: 'created' });
        expect(again.stdout).toMatch(/idem_records is up to date/);
      }
      store = await backend.store();
      await seed(store, !backend.nativeExpiry);
    });

    test('inspect shows a completed record, its headers and (asked for) its body, as text and as JSON', async () => {
      const text = await run('inspect', '--key', KEY_DONE, '--scope', SCOPE);
      expect(text.code, text.stderr).toBe(0);
      expect(text.stdout).toMatch(/state\s+completed/);
      expect(text.stdout).toMatch(/status\s+200/);
      expect(text.stdout).toMatch(/content-type: application\/json/);
      expect(text.stdout).toMatch(new RegExp(`body\\s+${BODY.length} B`));
      expect(text.stdout).not.toContain(BODY);
      const withBody = json(await run('inspect', '--key', KEY_DONE, '--scope', SCOPE, '--body', '--json'));
      expect(withBody).toMatchObject({
        found: true,
        record: {
          scope: SCOPE,
          key: KEY_DONE,
          state: 'completed',
          owner: null,
          response: { status: 200, bodyBytes: BODY.length, body: { utf8: BODY } },
        },
      });
      expect(Buffer.from(withBody.record.response.body.base64, 'base64').toString()).toBe(BODY);
      // A key quoted and in upper case, as a support ticket may give it, is the same key.
      const quoted = await run('inspect', '--key', `"${KEY_DONE.toUpperCase()}"`, '--scope', SCOPE, '--json');
      expect(json(quoted).record.key).toBe(KEY_DONE);
    });

    test('inspect shows an in-flight record with its owner and a lapsed lease, and exits 3 for a missing key', async () => {
      const stuck = json(await run('inspect', '--key', KEY_STUCK, '--scope', SCOPE, '--json'));
      expect(stuck.record).toMatchObject({
        state: 'in-flight',
        owner: 'owner-57c4',
        leaseLapsed: true,
        response: null,
      });
      const text = await run('inspect', '--key', KEY_STUCK, '--scope', SCOPE);
      expect(text.stdout).toMatch(/lapsed/);
      const missing = await run('inspect', '--key', KEY_DONE, '--scope', 'bob');
      expect(missing.code).toBe(3);
      expect(missing.stderr).toMatch(/no record for key .* in scope "bob"/);
    });

    test('list pages through the records of a scope, filters by state, and resumes from its cursor', async () => {
      const all = json(await run('list', '--scope', SCOPE, '--json'));
      const keys = all.records.map((r: { key: string }) => r.key).sort();
      const expected = [KEY_DONE, KEY_STUCK, KEY_RUNNING, ...(backend.nativeExpiry ? [] : [KEY_OLD])].sort();
      expect(keys).toEqual(expected);
      expect(all.cursor).toBeNull();
      for (const record of all.records) expect(record.response?.body).toBeUndefined();
      const inFlight = json(await run('list', '--scope', SCOPE, '--state', 'in-flight', '--json'));
      expect(inFlight.records.map((r: { key: string }) => r.key).sort()).toEqual(
        [KEY_STUCK, KEY_RUNNING].sort(),
      );
      // One at a time, each page's cursor leads to the next, and together they are the whole scope.
      const seen: string[] = [];
      let cursor: string | null = null;
      for (let page = 0; page < 20; page++) {
        const args: string[] = [
          '--scope',
          SCOPE,
          '--limit',
          '1',
          '--json',
          ...(cursor === null ? [] : ['--cursor', cursor]),
        ];
        const one = json(await run('list', ...args));
        expect(one.records.length).toBeLessThanOrEqual(1);
        seen.push(...one.records.map((r: { key: string }) => r.key));
        cursor = one.cursor;
        if (cursor === null) break;
      }
      expect([...new Set(seen)].sort()).toEqual(expected);
      const text = await run('list', '--scope', SCOPE);
      expect(text.code, text.stderr).toBe(0);
      expect(text.stdout.split('\n')[0]).toMatch(/STATE\s+SCOPE\s+KEY\s+STATUS\s+CREATED\s+EXPIRES\s+BODY/);
      expect(text.stdout).toContain(KEY_STUCK);
    });

    test('stats counts by state, lapsed leases and the oldest in-flight record', async () => {
      const counted = json(await run('stats', '--scope', SCOPE, '--json'));
      expect(counted).toMatchObject({
        inFlight: 2,
        leaseLapsed: 1,
        completed: 1,
        expired: backend.nativeExpiry ? 0 : 1,
      });
      expect(counted.oldestInFlightAgeMs).toBeGreaterThanOrEqual(600_000);
      expect(counted.oldestInFlightAgeMs).toBeLessThan(900_000);
      const text = await run('stats', '--scope', SCOPE);
      expect(text.stdout).toMatch(/in flight\s+2\s+1 with a lapsed lease/);
      expect(text.stdout).toMatch(/oldest in flight\s+10 min/);
    });

    test('forget asks before deleting, refuses an in-flight record without --force, and exits 3 for a missing key', async () => {
      const unconfirmed = await run('forget', '--key', KEY_DONE, '--scope', SCOPE);
      expectOneLine(unconfirmed, 4, /without confirmation: pass --yes/);
      const running = await run('forget', '--key', KEY_RUNNING, '--scope', SCOPE, '--yes');
      expectOneLine(running, 4, /in flight; .* --force/);
      expect(await store.load({ scope: SCOPE, key: KEY_RUNNING })).toBeDefined();

      const done = await run('forget', '--key', KEY_DONE, '--scope', SCOPE, '--yes', '--json');
      expect(json(done)).toMatchObject({ forgotten: true, state: 'completed' });
      expect(await store.load({ scope: SCOPE, key: KEY_DONE })).toBeUndefined();
      const forced = await run('forget', '--key', KEY_STUCK, '--scope', SCOPE, '--yes', '--force');
      expect(forced.code, forced.stderr).toBe(0);
      expect(forced.stdout).toMatch(/forgot the in-flight record/);
      expect(await store.load({ scope: SCOPE, key: KEY_STUCK })).toBeUndefined();
      const again = await run('forget', '--key', KEY_DONE, '--scope', SCOPE, '--yes');
      expect(again.code).toBe(3);
    });

    test('purge deletes the expired records (Redis has none left to delete)', async () => {
      const purged = json(await run('purge', '--grace', '0', '--json'));
      expect(purged.purged).toBe(backend.nativeExpiry ? 0 : 1);
      if (!backend.nativeExpiry) expect(await store.load({ scope: SCOPE, key: KEY_OLD })).toBeUndefined();
      expect(await store.load({ scope: SCOPE, key: KEY_RUNNING })).toBeDefined();
      const text = await run('purge', '--grace', '0');
      expect(text.stdout).toMatch(/purged 0 expired records in 1 batch/);
    });

    test('a cursor that is not one, and a limit out of range, are usage errors', async () => {
      expectOneLine(await run('list', '--cursor', 'not-a-cursor'), 2, /cursor/);
      const zero = await run('list', '--limit', '0');
      expect(zero.code).toBe(2);
      expect(zero.stderr).toMatch(/--limit must be a whole number/);
    });
  });
}

describe('bad input: one clear line, a non-zero exit, never a stack trace or a password', () => {
  test('an unknown scheme, a URL without a database, and no URL at all are usage errors', async () => {
    expectOneLine(
      await idem(['stats', 'mongodb://user:Hunter2Secret@db/x']),
      2,
      /must be postgres:\/\/.*got a "mongodb:" URL/,
    );
    const noDb = await idem(['stats', 'postgres://user:Hunter2Secret@127.0.0.1:5432']);
    expectOneLine(noDb, 2, /names no database/);
    expect(noDb.stderr).not.toContain('Hunter2Secret');
    expectOneLine(await idem(['stats']), 2, /name the store: .* IDEM_STORE_URL/);
    const unknown = await idem(['frobnicate']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/unknown command 'frobnicate'/);
  });

  test('an unreachable server is named, with its password masked', async () => {
    for (const url of [
      'postgres://postgres:Hunter2Secret@127.0.0.1:1/test',
      'mysql://root:Hunter2Secret@127.0.0.1:1/test',
      'redis://:Hunter2Secret@127.0.0.1:1',
      'redis+cluster://default:Hunter2Secret@127.0.0.1:1,127.0.0.1:2',
    ]) {
      const ran = await idem(['stats', url, '--timeout', '3000']);
      expectOneLine(ran, 1, /cannot reach .*(connection refused|no node of the cluster answered)/);
      expect(ran.stderr).toContain('***');
      expect(`${ran.stdout}${ran.stderr}`).not.toContain('Hunter2Secret');
    }
  });

  test('a missing SQLite file is not created, except by migrate', async () => {
    const ran = await idem(['list', 'sqlite:/tmp/idem-cli-nothing-here/records.db']);
    expectOneLine(ran, 1, /no SQLite database at .* \(idem migrate creates one\)/);
    expect(existsSync('/tmp/idem-cli-nothing-here')).toBe(false);
  });

  test('migrate --dry-run prints the DDL without connecting', async () => {
    const ran = await idem([
      'migrate',
      'postgres://u:Hunter2Secret@127.0.0.1:1/db',
      '--dry-run',
      '--table',
      'orders_idem',
    ]);
    expect(ran.code, ran.stderr).toBe(0);
    expect(ran.stdout).toMatch(/CREATE TABLE IF NOT EXISTS "orders_idem"/);
    expect(ran.stdout).toMatch(/CREATE INDEX IF NOT EXISTS "orders_idem_expires_idx"/);
    const mysqlDdl = await idem(['migrate', 'mysql://root@127.0.0.1:1/db', '--dry-run']);
    expect(mysqlDdl.stdout).toMatch(/CREATE TABLE IF NOT EXISTS `idem_records`/);
  });

  test('--help on every command', async () => {
    for (const command of ['migrate', 'inspect', 'forget', 'list', 'stats', 'purge']) {
      const ran = await idem([command, '--help']);
      expect(ran.code).toBe(0);
      expect(ran.stdout).toMatch(new RegExp(`^Usage: idem ${command}`));
      expect(ran.stdout).toMatch(/--json/);
    }
    const top = await idem(['--help']);
    expect(top.stdout).toMatch(
      /Exit codes: 0 done, 1 the store failed, 2 usage, 3 no such record, 4 refused/,
    );
  });
});

describe.runIf(
  await available('PostgreSQL', async () => {
    const client = new pg.Client({ connectionString: PG_URL, connectionTimeoutMillis: 3_000 });
    await client.connect();
    await client.end();
  }),
)('PostgreSQL faults', () => {
  test('a missing table says to run migrate', async () => {
    const ran = await idem(['list', PG_URL, '--table', 'idem_cli_no_such_table']);
    expectOneLine(
      ran,
      1,
      /the table idem_cli_no_such_table does not exist in this database: run `idem migrate` first/,
    );
  });

  test('a password in the URL (which trust auth ignores) is never echoed, even in JSON', async () => {
    const url = new URL(PG_URL);
    url.password = 'Hunter2Secret';
    const migrated = await idem(['migrate', url.href, '--table', 'idem_cli_password_check', '--json']);
    expect(migrated.code, migrated.stderr).toBe(0);
    const listed = await idem(['list', url.href, '--table', 'idem_cli_password_check']);
    const failed = await idem(['list', url.href, '--table', 'idem_cli_missing_table']);
    for (const ran of [migrated, listed, failed])
      expect(`${ran.stdout}${ran.stderr}`).not.toContain('Hunter2Secret');
    const client = new pg.Client({ connectionString: PG_URL });
    await client.connect();
    await client.query('DROP TABLE IF EXISTS idem_cli_password_check');
    await client.end();
  });

  test('the URL may come from IDEM_STORE_URL', async () => {
    const ran = await idem(['list', '--table', 'idem_cli_no_such_table'], { IDEM_STORE_URL: PG_URL });
    expectOneLine(ran, 1, /does not exist/);
  });
});

describe.runIf(
  await available('MariaDB', async () =>
    (await mysql.createConnection({ uri: MYSQL_URL, connectTimeout: 3_000 })).end(),
  ),
)('MariaDB faults', () => {
  test('credentials the server refuses are named as such, the password masked', async () => {
    const url = new URL(MYSQL_URL);
    url.username = 'idem_cli_nobody';
    url.password = 'Hunter2Secret';
    const ran = await idem(['stats', url.href]);
    expectOneLine(ran, 1, /MySQL at mysql:\/\/idem_cli_nobody:\*\*\*@.* refused the credentials/);
    expect(`${ran.stdout}${ran.stderr}`).not.toContain('Hunter2Secret');
  });

  test('a database that does not exist is named as such', async () => {
    const url = new URL(MYSQL_URL);
    url.pathname = '/idem_cli_no_such_database';
    expectOneLine(await idem(['stats', url.href]), 1, /has no such database/);
  });
});
