import { mkdtempSync, rmSync } from 'node:fs';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import type { IdempotencyStore } from '@idem/core';
import { createRedisStore } from '@idem/store-redis';
import { createSqlStore } from '@idem/store-sql';
import Database from 'better-sqlite3';
import Table from 'cli-table3';
import { drizzle as sqliteDrizzle } from 'drizzle-orm/better-sqlite3';
import { drizzle as pgDrizzle } from 'drizzle-orm/node-postgres';
import { Redis } from 'ioredis';
import mysql from 'mysql2/promise';
import pg from 'pg';
import pc from 'picocolors';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { table } from '../src/output.js';
import { run } from '../src/program.js';
import {
  available,
  CLUSTER_NODES,
  MYSQL_URL,
  mysqlBackend,
  PG_URL,
  postgresBackend,
  REDIS_URL,
} from './support/backends.js';
import { idem } from './support/run.js';

// Attacks on the `idem` command: what a stored value, a URL or an operator's keystroke can make it do. Run in
// process where the output is all that matters, as the built binary where the process itself is the question.

/** A terminal-less stream that keeps what is written. */
function sink(tty = false) {
  const stream = Object.assign(new PassThrough(), { isTTY: tty, columns: 100 });
  let text = '';
  stream.on('data', (chunk: Buffer) => {
    text += chunk.toString('utf8');
  });
  return { stream, text: () => text };
}

/** `run` in this process; `stdin` (a terminal when `tty`) is the operator's keyboard. */
function inProcess(argv: readonly string[], options: { tty?: boolean; env?: NodeJS.ProcessEnv } = {}) {
  const stdout = sink();
  const stderr = sink(options.tty === true);
  const stdin = Object.assign(new PassThrough(), { isTTY: options.tty === true });
  const done = run(argv, { stdout: stdout.stream, stderr: stderr.stream, stdin, env: options.env ?? {} });
  return { done, stdin, stdout: stdout.text, stderr: stderr.text };
}

async function until(check: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 200 && !check(); i++) await new Promise((resolve) => setTimeout(resolve, 25));
  if (!check()) throw new Error(`timed out waiting for ${what}`);
}

/** A SQLite file migrated by the command, and the library's store over it. */
function sqliteFile() {
  const dir = mkdtempSync(join(tmpdir(), 'idem-cli-review-'));
  const file = join(dir, 'records.db');
  let connection: Database.Database | undefined;
  return {
    url: `sqlite:${file}`,
    async store(): Promise<IdempotencyStore> {
      const migrated = await inProcess(['migrate', `sqlite:${file}`]).done;
      expect(migrated).toBe(0);
      connection ??= new Database(file, { fileMustExist: true });
      return createSqlStore(sqliteDrizzle(connection), { dialect: 'sqlite' });
    },
    dispose() {
      connection?.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

const HOUR_MS = 3_600_000;

/** A completed record of (scope, key) with these headers and body, written through the library. */
async function completed(
  store: IdempotencyStore,
  ref: { scope: string; key: string },
  response: { headers?: Record<string, string>; body?: string; owner?: string; fingerprint?: string } = {},
) {
  const now = Date.now();
  const owner = response.owner ?? 'owner-1';
  await store.reserve({
    ...ref,
    fingerprint: response.fingerprint ?? 'f'.repeat(64),
    owner,
    nowMs: now - 1000,
    leaseUntilMs: now + 30_000,
    expiresAtMs: now + HOUR_MS,
  });
  expect(
    await store.finalize({
      ...ref,
      owner,
      nowMs: now,
      response: {
        status: 200,
        headers: response.headers ?? {},
        body: response.body === undefined ? null : new TextEncoder().encode(response.body),
      },
    }),
  ).toBe(true);
}

// ESC, BEL, CR, a C1 CSI and a bidi override: what rewrites an operator's terminal or hides text from them.
// biome-ignore lint/suspicious/noControlCharactersInRegex: the characters that must not be there.
const CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/;

describe('stored values never reach the terminal as control sequences', () => {
  // Made when the block runs: a test filter that skips it leaves no directory behind.
  let db: ReturnType<typeof sqliteFile>;
  let store: IdempotencyStore;
  const scope = 'tenant\u001b]0;owned\u0007\u001b[2J\rtenant';
  const key = 'order\u001b[31m-1\nfake line';
  beforeAll(async () => {
    db = sqliteFile();
    store = await db.store();
    await completed(
      store,
      { scope, key },
      {
        owner: 'o',
        fingerprint: 'fp\u009b2J',
        headers: { 'x-note': 'a\u001b]8;;https://evil.example\u0007click\u001b]8;;\u0007\r\u001b[Kok' },
        body: 'body\u001b[2J\u202eevil\nsecond line',
      },
    );
  });
  afterAll(() => db?.dispose());

  test('list shows a hostile scope and key as one inert row', async () => {
    const ran = inProcess(['list', db.url]);
    expect(await ran.done).toBe(0);
    expect(ran.stdout()).not.toMatch(CONTROL);
    expect(ran.stdout().trimEnd().split('\n')).toHaveLength(2);
    expect(ran.stdout()).toContain('\\x1b]0;owned');
  });

  test('inspect shows hostile headers, fingerprint and body inert, and the JSON keeps them exact', async () => {
    const ran = inProcess(['inspect', db.url, '--key', key, '--scope', scope, '--body']);
    expect(await ran.done).toBe(0);
    expect(ran.stdout()).not.toMatch(CONTROL);
    expect(ran.stdout()).toContain('second line'); // a body's own line breaks stay
    const json = inProcess(['inspect', db.url, '--key', key, '--scope', scope, '--body', '--json']);
    expect(await json.done).toBe(0);
    const { record } = JSON.parse(json.stdout());
    expect(record.scope).toBe(scope);
    expect(record.key).toBe(key);
  });

  test('a message naming a key it did not find is one inert line', async () => {
    const ran = inProcess(['inspect', db.url, '--key', 'x\u001b[2J\ny']);
    expect(await ran.done).toBe(3);
    expect(ran.stderr()).not.toMatch(CONTROL);
    expect(ran.stderr().trimEnd().split('\n')).toHaveLength(1);
  });
});

describe('the table of list', () => {
  const colors = pc.createColors(true);
  const head = ['STATE', 'SCOPE', 'KEY'];

  test('aligns as cli-table3 did: colours, wide characters, emoji and combining marks', () => {
    const rows = [
      [colors.yellow('in-flight'), '租户-42', 'order-1'],
      [colors.green('completed'), 'te\u0301nant', '🧾-2'],
      [colors.dim('expired'), colors.dim("''"), 'ｆｕｌｌ'],
    ];
    // The options table() gave cli-table3: no borders, two spaces between columns, no padding.
    const chars = Object.fromEntries(
      ['top', 'top-mid', 'top-left', 'top-right', 'bottom', 'bottom-mid', 'bottom-left', 'bottom-right']
        .concat(['left', 'left-mid', 'mid', 'mid-mid', 'right', 'right-mid'])
        .map((name) => [name, '']),
    );
    const reference = new Table({
      head: head.map((title) => colors.dim(title)),
      chars: { ...chars, middle: '  ' },
      style: { head: [], border: [], 'padding-left': 0, 'padding-right': 0 },
    });
    for (const row of rows) reference.push(row);
    const expected = reference
      .toString()
      .split('\n')
      .map((line) => line.trimEnd())
      .join('\n');
    expect(table(head, rows, colors)).toBe(expected);
  });

  test('of 20,000 records takes well under a second, not minutes (cli-table3 was quadratic)', () => {
    const rows = Array.from({ length: 20_000 }, (_, i) => [
      colors.green('completed'),
      'tenant',
      `order-${i}`,
    ]);
    const started = performance.now();
    const text = table(head, rows, colors);
    expect(performance.now() - started).toBeLessThan(2_000);
    expect(text.split('\n')).toHaveLength(20_001);
  });
});

describe('the password of a URL commander echoes', () => {
  test.each([
    ['an "@" in it', 'postgres://u:p@ssw0rd9@127.0.0.1:1/db', 'ssw0rd9'],
    ['shorter than 3 characters', 'postgres://u:pw@127.0.0.1:1/db', 'u:pw@'],
    ['a "/" in it', 'postgres://u:pa/ssw0rd9@127.0.0.1:1/db', 'ssw0rd9'],
    ['an "@" in it, in a cluster URL', 'redis+cluster://u:p@ssw0rd9@127.0.0.1:1', 'ssw0rd9'],
  ])('with %s is masked', async (_, url, secret) => {
    const ran = inProcess([url, 'stats']); // the URL in the command's place: "unknown command '…'"
    expect(await ran.done).toBe(2);
    expect(ran.stderr()).toMatch(/unknown command/);
    expect(ran.stderr()).not.toContain(secret);
  });
});

test.each(['redis://:%zz@127.0.0.1:1', 'redis+cluster://:%zz@127.0.0.1:1'])(
  'a password that is not percent-encoded (%s) is a usage error',
  async (url) => {
    const ran = inProcess(['stats', url]);
    expect(await ran.done).toBe(2);
    expect(ran.stderr()).toMatch(/not percent-encoded/);
  },
);

test('a scope or key longer than the store holds is a usage error, not a store failure', async () => {
  const db = sqliteFile();
  try {
    await db.store();
    const long = 'x'.repeat(300);
    for (const args of [
      ['list', '--scope', long],
      ['stats', '--scope', long],
      ['inspect', '--scope', long, '--key', 'k'],
      ['forget', '--key', long, '--yes'],
    ]) {
      const [command, ...rest] = args as [string, ...string[]];
      const ran = inProcess([command, db.url, ...rest]);
      expect(await ran.done, command).toBe(2);
      expect(ran.stderr()).toMatch(/has 300 characters; the SQL store holds at most 255/);
      expect(ran.stderr()).not.toMatch(/failed/);
    }
  } finally {
    db.dispose();
  }
});

test('--no-color, which the colours promise, is taken after the command too, over FORCE_COLOR', async () => {
  const db = sqliteFile();
  try {
    await db.store();
    const coloured = inProcess(['stats', db.url], { env: { FORCE_COLOR: '1' } });
    expect(await coloured.done).toBe(0);
    expect(coloured.stdout()).toContain('\u001b[');
    const plain = inProcess(['stats', db.url, '--no-color'], { env: { FORCE_COLOR: '1' } });
    expect(await plain.done, plain.stderr()).toBe(0);
    expect(plain.stdout()).not.toContain('\u001b[');
  } finally {
    db.dispose();
  }
});

test('migrate into a directory that does not exist says so, not that migrate would create the file', async () => {
  const ran = inProcess(['migrate', 'sqlite:/tmp/idem-cli-review-no-such-dir/records.db']);
  expect(await ran.done).toBe(1);
  expect(ran.stderr()).toMatch(/directory does not exist/);
  expect(ran.stderr()).not.toMatch(/migrate creates one/);
});

describe('--timeout', () => {
  test('beyond what a Node timer holds is a usage error, not an instant timeout', async () => {
    const ran = await idem(['stats', 'sqlite:/tmp/idem-cli-review-none.db', '--timeout', '99999999999']);
    expect(ran.code).toBe(2);
    expect(ran.stderr).toMatch(/--timeout must be a whole number from 1 to 2147483647/);
    expect(ran.stderr).not.toMatch(/TimeoutOverflowWarning/);
  });
});

describe('a bad --table or --prefix', () => {
  test.each([
    ['migrate', 'sqlite:/tmp/idem-cli-review-bad-table.db', '--table', 'x"; drop table y; --'],
    ['migrate', 'postgres://u@127.0.0.1:1/db', '--table', 'x"; drop', '--dry-run'],
    ['list', `redis://127.0.0.1:1`, '--prefix', '{tag}'],
  ])('is a usage error (%s %s)', async (...args) => {
    const ran = inProcess(args);
    expect(await ran.done).toBe(2);
    expect(ran.stderr()).toMatch(/table name|prefix/);
    expect(ran.stderr()).not.toMatch(/failed/);
  });
});

describe('forget at the prompt', () => {
  // Made when the block runs: a test filter that skips it leaves no directory behind.
  let db: ReturnType<typeof sqliteFile>;
  let store: IdempotencyStore;
  beforeAll(async () => {
    db = sqliteFile();
    store = await db.store();
  });
  afterAll(() => db?.dispose());

  test.each([
    ['Ctrl-D', '\u0004'],
    ['Ctrl-C', '\u0003'],
    ['a terminal that goes away', undefined],
  ])('%s is a no, not a store failure', async (what, keystroke) => {
    const ref = { scope: '', key: `done-${what}` };
    await completed(store, ref);
    const ran = inProcess(['forget', db.url, '--key', ref.key], { tty: true });
    await until(() => ran.stderr().includes('[y/N]'), 'the prompt');
    if (keystroke === undefined) ran.stdin.end();
    else ran.stdin.write(keystroke);
    expect(await ran.done).toBe(4);
    expect(ran.stderr()).toMatch(/not forgotten/);
    expect(ran.stderr()).not.toMatch(/SQLite failed|Aborted/);
    expect(await store.load(ref)).toBeDefined();
  });

  test('a record that went in flight while the operator was asked is not forgotten without --force', async () => {
    const ref = { scope: 'tenant', key: 'expired-then-retried' };
    const now = Date.now();
    await store.reserve({
      ...ref,
      fingerprint: 'f'.repeat(64),
      owner: 'old',
      nowMs: now - 2 * HOUR_MS,
      leaseUntilMs: now - 2 * HOUR_MS + 30_000,
      expiresAtMs: now - HOUR_MS,
    });
    const ran = inProcess(['forget', db.url, '--key', ref.key, '--scope', ref.scope], { tty: true });
    await until(() => ran.stderr().includes('[y/N]'), 'the prompt');
    expect(ran.stderr()).toMatch(/Forget the expired record/);
    // A retry takes the expired key over while the question is on the screen: its handler is running now.
    const retried = await store.reserve({
      ...ref,
      fingerprint: 'f'.repeat(64),
      owner: 'retry',
      nowMs: Date.now(),
      leaseUntilMs: Date.now() + 60_000,
      expiresAtMs: Date.now() + HOUR_MS,
    });
    expect(retried.outcome).toBe('reserved');
    ran.stdin.write('y\r');
    expect(await ran.done).toBe(4);
    expect(ran.stderr()).toMatch(/changed while you were asked \(in-flight now\)/);
    expect((await store.load(ref))?.owner).toBe('retry');
  });
});

describe('purge on a terminal', () => {
  test('changes no terminal mode (a Ctrl-C would leave it changed: nothing restores it)', async () => {
    const db = sqliteFile();
    try {
      const store = await db.store();
      const now = Date.now();
      await store.reserve({
        scope: '',
        key: 'old',
        fingerprint: 'f',
        owner: 'o',
        nowMs: now - 2 * HOUR_MS,
        leaseUntilMs: now - 2 * HOUR_MS,
        expiresAtMs: now - HOUR_MS,
      });
      const ran = inProcess(['purge', db.url], { tty: true });
      expect(await ran.done).toBe(0);
      expect(ran.stderr()).toMatch(/purging/);
      expect(ran.stderr()).not.toContain('\u001b[?25l'); // cursor hidden
      expect(ran.stderr()).not.toContain('\u001b[?7l'); // line wrapping off
    } finally {
      db.dispose();
    }
  });
});

describe('a server that accepts and never answers', () => {
  let server: Server;
  let port = 0;
  beforeAll(async () => {
    server = createServer((socket) => socket.resume());
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as { port: number }).port;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  test.each(['redis', 'postgres', 'mysql'])('%s: the command ends within --timeout', async (scheme) => {
    const url = scheme === 'redis' ? `redis://127.0.0.1:${port}` : `${scheme}://u@127.0.0.1:${port}/db`;
    const ran = await idem(['stats', url, '--timeout', '2000']);
    expect(ran.code).toBe(1);
    expect(ran.stderr).toMatch(/did not answer in time/);
    // Node's start and the store's modules take a moment; a second --timeout does not fit in it.
    expect(ran.ms).toBeLessThan(3_500);
  });
});

/**
 * A loopback proxy to `target` that forwards both ways until the bytes towards the database contain `pattern`,
 * then drops everything on that connection, its sockets kept open: a path that stalls after it connected.
 */
async function stallingProxy(target: URL, pattern: string) {
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    const upstream = connect({ host: target.hostname, port: Number(target.port) });
    let silent = false;
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('error', () => {});
    }
    client.on('data', (chunk: Buffer) => {
      if (chunk.toString('latin1').includes(pattern)) silent = true;
      if (!silent) upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      if (!silent) client.write(chunk);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = new URL(target);
  url.host = `127.0.0.1:${(server.address() as { port: number }).port}`;
  return {
    url: url.href,
    close: () => {
      for (const socket of sockets) socket.destroy();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

describe('a server database whose path stalls after the connection is made', () => {
  const matrix = [
    { name: 'PostgreSQL', make: postgresBackend },
    { name: 'MariaDB', make: mysqlBackend },
  ];
  for (const { name, make } of matrix) {
    describe(name, async () => {
      const up = await available(name, async () => (await make()).dispose());
      // Each command's statement on the records table stalls; the connection and its `SELECT 1` go through.
      test.runIf(up).each([
        ['stats', []],
        ['list', []],
        ['inspect', ['--key', '01890a5d-ac96-774b-bcce-b302099a8057']],
        ['purge', []],
        ['migrate', []],
      ] as const)('%s ends within --timeout, as a timeout', async (command, extra) => {
        const backend = await make();
        const ready = await idem(['migrate', backend.url]);
        expect(ready.code, ready.stderr).toBe(0);
        const proxy = await stallingProxy(new URL(backend.url), 'idem_records');
        try {
          // What a run takes here without a stall (Node's start, the modules, the connection), as the machine is now.
          const unstalled = await idem(['stats', backend.url]);
          expect(unstalled.code, unstalled.stderr).toBe(0);
          const ran = await idem([command, proxy.url, ...extra, '--timeout', '1500']);
          expect(ran.code, ran.stderr).toBe(1);
          expect(ran.stderr).toMatch(/did not answer in time/);
          // On top of that: the call's own bound and the client's margin past it (the close does not wait behind
          // a call that never answered), and a margin for this machine.
          expect(ran.ms - unstalled.ms).toBeLessThan(1_500 + 500 + 1_000);
        } finally {
          await proxy.close();
          await backend.dispose();
        }
      });
    });
  }
});

describe('a slow statement past --timeout is ended by the database, undone', () => {
  // A delete that takes a second (a trigger sleeps): the database's own bound ends it at --timeout and rolls it
  // back, so "did not answer in time" means the record is still there, never that it went anyway.
  const matrix = [
    {
      name: 'PostgreSQL',
      make: postgresBackend,
      slow: [
        `CREATE FUNCTION idem_slow() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(1); RETURN OLD; END $$`,
        'CREATE TRIGGER idem_slow BEFORE DELETE ON idem_records FOR EACH ROW EXECUTE FUNCTION idem_slow()',
      ],
      run: async (url: string, statements: string[]) => {
        const client = new pg.Client({ connectionString: url });
        await client.connect();
        try {
          for (const statement of statements) await client.query(statement);
        } finally {
          await client.end();
        }
      },
    },
    {
      name: 'MariaDB',
      make: mysqlBackend,
      slow: ['CREATE TRIGGER idem_slow BEFORE DELETE ON idem_records FOR EACH ROW SET @slept = SLEEP(1)'],
      run: async (url: string, statements: string[]) => {
        const connection = await mysql.createConnection({ uri: url });
        try {
          for (const statement of statements) await connection.query(statement);
        } finally {
          await connection.end();
        }
      },
    },
  ];
  for (const { name, make, slow, run: runSql } of matrix) {
    describe(name, async () => {
      const up = await available(name, async () => (await make()).dispose());
      test.runIf(up)('forget: a timeout, and the record is still there', async () => {
        const backend = await make();
        try {
          expect((await idem(['migrate', backend.url])).code).toBe(0);
          const store = await backend.store();
          const key = '01890a5d-ac96-774b-bcce-b302099a8057';
          const now = Date.now();
          const reserved = { scope: '', key, owner: 'owner-1' };
          await store.reserve({
            ...reserved,
            fingerprint: 'f'.repeat(64),
            nowMs: now,
            leaseUntilMs: now + 30_000,
            expiresAtMs: now + 3_600_000,
          });
          await store.finalize({
            ...reserved,
            nowMs: now,
            response: { status: 201, headers: {}, body: null },
          });
          await runSql(backend.url, slow);
          const ran = await idem(['forget', backend.url, '--key', key, '--yes', '--timeout', '300']);
          expect(ran.code, ran.stderr).toBe(1);
          expect(ran.stderr).toMatch(/did not answer in time/);
          await sleep(1_500); // past the trigger's second, had the delete gone on
          expect(
            await store.load({ scope: '', key }),
            'the record survives the refused delete',
          ).toBeDefined();
        } finally {
          await backend.dispose();
        }
      });
    });
  }
});

const redisUp = await available('Redis', async () => {
  const client = new Redis(REDIS_URL, { maxRetriesPerRequest: 0, retryStrategy: () => null });
  try {
    await client.ping();
  } finally {
    client.disconnect();
  }
});

describe.runIf(redisUp)('the database of a redis:// URL', () => {
  const prefix = `idem-cli-review:${process.pid}:`;
  let client: Redis;
  beforeAll(async () => {
    client = new Redis(REDIS_URL);
    await completed(createRedisStore(client, { prefix }), { scope: 'db0', key: 'in-database-0' });
  });
  afterAll(async () => {
    for (const key of await client.keys(`${prefix}*`)) await client.del(key);
    client.disconnect();
  });

  test.each(['abc', '1.5', '-1'])('/%s is a usage error, never a crash', async (db) => {
    const ran = await idem(['list', `${REDIS_URL}/${db}`, '--prefix', prefix]);
    expect(ran.code, ran.stderr).toBe(2);
    expect(ran.stderr.trim().split('\n')).toHaveLength(1);
    expect(ran.stderr).toMatch(/database/);
    expect(ran.stdout).toBe('');
  });

  test('a database the server does not have fails: the command never runs on database 0 instead', async () => {
    const ran = await idem(['list', `${REDIS_URL}/99999`, '--prefix', prefix]);
    expect(ran.code).toBe(1);
    expect(ran.stderr.trim().split('\n')).toHaveLength(1);
    expect(ran.stderr).toMatch(/DB index is out of range/);
    expect(ran.stdout).not.toContain('in-database-0');
  });
});

const clusterUp = await available('Redis Cluster', async () => {
  const { host, port } = CLUSTER_NODES[0] as { host: string; port: number };
  const node = new Redis({ host, port, maxRetriesPerRequest: 0, retryStrategy: () => null });
  try {
    if (!String(await node.cluster('INFO')).includes('cluster_state:ok')) throw new Error('cluster not ok');
  } finally {
    node.disconnect();
  }
});

describe.runIf(clusterUp)('a Cluster node named by redis://', () => {
  test('is a usage error: it holds a part of the records, and stats would count only that part', async () => {
    const { host, port } = CLUSTER_NODES[0] as { host: string; port: number };
    const ran = inProcess(['stats', `redis://:Hunter2pw@${host}:${port}`, '--json']);
    expect(await ran.done).toBe(2);
    expect(ran.stdout()).toBe('');
    expect(ran.stderr()).toMatch(/is a Redis Cluster node: name the cluster, redis\+cluster:\/\//);
    expect(ran.stderr()).not.toContain('Hunter2pw');
  });
});

describe.runIf(
  await available('PostgreSQL', async () => {
    const client = new pg.Client({ connectionString: PG_URL, connectionTimeoutMillis: 3_000 });
    await client.connect();
    await client.end();
  }),
)('a password that also occurs in the records (PostgreSQL, which trust auth lets through)', () => {
  const table = `idem_cli_review_${process.pid}`;
  let pool: pg.Pool;
  beforeAll(async () => {
    pool = new pg.Pool({ connectionString: PG_URL, max: 2 });
    expect(await inProcess(['migrate', PG_URL, '--table', table]).done).toBe(0);
  });
  afterAll(async () => {
    await pool.query(`DROP TABLE IF EXISTS ${table}`);
    await pool.end();
  });

  test('a setting the server refuses is not called a timeout because its name has "timeout" in it', async () => {
    const url = new URL(PG_URL);
    url.searchParams.set('options', '-c statement_timeout=soon');
    const ran = inProcess(['stats', url.href, '--table', table]);
    expect(await ran.done).toBe(1);
    expect(ran.stderr()).toMatch(/invalid value for parameter "statement_timeout"/);
    expect(ran.stderr()).not.toMatch(/did not answer in time/);
  });

  test('a statement behind a lock ends within --timeout', async () => {
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      await client.query(`LOCK TABLE ${table} IN ACCESS EXCLUSIVE MODE`);
      const ran = inProcess(['stats', PG_URL, '--table', table, '--timeout', '1000']);
      expect(await ran.done).toBe(1);
      expect(ran.stderr()).toMatch(/did not answer in time/);
    } finally {
      await client.query('ROLLBACK');
      client.release();
    }
  });

  test('leaves the JSON of the records whole: the data is not the URL', async () => {
    const store = createSqlStore(pgDrizzle(pool), { dialect: 'postgres', table });
    const key = '0190a2b4-0000-7000-8000-000000001234';
    await completed(store, { scope: '', key }, { body: 'x'.repeat(1234) });
    const url = new URL(PG_URL);
    url.password = '1234';
    const ran = inProcess(['inspect', url.href, '--table', table, '--key', key, '--json']);
    expect(await ran.done).toBe(0);
    const { record } = JSON.parse(ran.stdout());
    expect(record.key).toBe(key);
    expect(record.response.bodyBytes).toBe(1234);
    // A message still never shows it.
    url.pathname = '/idem_cli_review_no_such_database';
    const missing = inProcess(['inspect', url.href, '--table', table, '--key', key]);
    expect(await missing.done).toBe(1);
    expect(missing.stderr()).toMatch(/has no such database/);
    expect(missing.stderr()).toContain(':***@');
    expect(missing.stderr()).not.toContain('1234');
  });
});

describe.runIf(
  await available('MariaDB', async () =>
    (await mysql.createConnection({ uri: MYSQL_URL, connectTimeout: 3_000 })).end(),
  ),
)('MariaDB', () => {
  const table = `idem_cli_review_${process.pid}`;
  let admin: mysql.Connection;
  beforeAll(async () => {
    admin = await mysql.createConnection({ uri: MYSQL_URL });
    expect(await inProcess(['migrate', MYSQL_URL, '--table', table]).done).toBe(0);
  });
  afterAll(async () => {
    await admin.query('UNLOCK TABLES');
    await admin.query(`DROP TABLE IF EXISTS ${table}`);
    await admin.end();
  });

  test('a table another session holds locked fails within --timeout, it does not wait for the lock', async () => {
    await admin.query(`LOCK TABLES ${table} WRITE`);
    try {
      const ran = await idem(['stats', MYSQL_URL, '--table', table, '--timeout', '2000']);
      expect(ran.code, ran.stderr).toBe(1);
      expect(ran.stderr).toMatch(/did not answer in time/);
      expect(ran.ms).toBeLessThan(6_000);
    } finally {
      await admin.query('UNLOCK TABLES');
    }
  });
});
