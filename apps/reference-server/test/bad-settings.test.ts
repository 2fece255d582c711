import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, test } from 'vitest';
import { spawnServer } from './support/process.js';

// A setting the server cannot use stops it at startup with one line on stderr that names the setting and what
// it accepts, and exit code 2; never an uncaught stack (before: `PORT=abc` ended in a 12-line stack and exit
// code 1, `DATABASE_URL=ftp://x` was opened as a SQLite file of that name, an unknown LOG_LEVEL was pino's stack,
// a CONFIG_FILE that is not JSON printed JSON.parse's quote of the file).

const dir = mkdtempSync(join(tmpdir(), 'idem-settings-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const notJson = join(dir, 'settings.txt');
writeFileSync(notJson, 'PORT=8282\nSECRET_TOKEN=hunter2-in-the-file\n');
const array = join(dir, 'array.json');
writeFileSync(array, '[1, 2]');
const badInFile = join(dir, 'bad.json');
writeFileSync(badInFile, JSON.stringify({ DATABASE_POOL_SIZE: 'eighty' }));

function start(
  env: Record<string, string>,
): Promise<{ code: number | null; stderr: string; stdout: string }> {
  return new Promise((resolve, reject) => {
    const child = spawnServer({
      HOME: process.env.HOME ?? dir,
      DATABASE_URL: 'sqlite::memory:',
      WAREHOUSE: join(dir, 'warehouse'),
      PORT: '0',
      LOG_FORMAT: 'json',
      ...env,
    });
    let [stdout, stderr] = ['', ''];
    child.stdout.on('data', (chunk) => {
      stdout += String(chunk);
    });
    child.stderr.on('data', (chunk) => {
      stderr += String(chunk);
    });
    // A server that starts despite the setting is a failure too: it is stopped and reported.
    const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    child.once('error', reject);
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stderr, stdout });
    });
  });
}

/** Each bad setting, what its line must name, and what it must never show. */
const cases: { env: Record<string, string>; names: RegExp; never?: string }[] = [
  { env: { PORT: 'abc' }, names: /PORT must be a whole number from 0 to 65535, got "abc"/ },
  { env: { PORT: '70000' }, names: /PORT .*0 to 65535/ },
  { env: { PORT: '0x1F90' }, names: /PORT/ },
  { env: { REQUEST_TIMEOUT_MS: '-1' }, names: /REQUEST_TIMEOUT_MS must be a whole number of at least 1/ },
  { env: { DATABASE_STATEMENT_TIMEOUT_MS: '1.5' }, names: /DATABASE_STATEMENT_TIMEOUT_MS/ },
  { env: { DATABASE_POOL_SIZE: '0' }, names: /DATABASE_POOL_SIZE/ },
  { env: { HEALTH_TIMEOUT_MS: 'soon' }, names: /HEALTH_TIMEOUT_MS/ },
  {
    env: { DATABASE_URL: 'ftp://x' },
    names: /DATABASE_URL must be sqlite:<file>.*postgres:\/\/.*mysql:\/\/.*"ftp:"/,
  },
  {
    env: { DATABASE_URL: 'ftp://admin:s3cret-pw@db.example/x' },
    names: /DATABASE_URL must be/,
    never: 's3cret-pw',
  },
  { env: { DATABASE_URL: 'postgres://postgres:pw1234@' }, names: /DATABASE_URL/, never: 'pw1234' },
  { env: { DATABASE_URL: 'mysql://root@127.0.0.1:3306' }, names: /DATABASE_URL names no database/ },
  { env: { DATABASE_URL: './catalog.db' }, names: /DATABASE_URL must be .*without a scheme/ },
  {
    env: { LOG_LEVEL: 'loud' },
    names: /LOG_LEVEL must be one of fatal, error, warn, info, debug, trace, silent/,
  },
  { env: { LOG_FORMAT: 'xml' }, names: /LOG_FORMAT must be one of auto, json, pretty/ },
  { env: { IDEMPOTENCY_ENABLED: 'maybe' }, names: /IDEMPOTENCY_ENABLED must be true or false/ },
  {
    env: { IDEMPOTENCY_READ_BEFORE_TRANSACTION: 'sometimes' },
    names: /IDEMPOTENCY_READ_BEFORE_TRANSACTION must be true or false/,
  },
  { env: { METRICS_ENABLED: '2' }, names: /METRICS_ENABLED must be true or false/ },
  {
    env: { IDEMPOTENCY_KEY_LIFETIME: 'forever' },
    names: /IDEMPOTENCY_KEY_LIFETIME must be an ISO-8601 duration/,
  },
  { env: { IDEMPOTENCY_KEY_LIFETIME: 'PT0S' }, names: /IDEMPOTENCY_KEY_LIFETIME/ },
  { env: { AUTH_TOKENS: 'secret-token-no-principal' }, names: /AUTH_TOKENS/, never: 'secret-token' },
  { env: { HOST: 'bad\nhost' }, names: /HOST must be an address/ },
  { env: { CONFIG_FILE: join(dir, 'missing.json') }, names: /CONFIG_FILE ".*missing\.json" does not exist/ },
  { env: { CONFIG_FILE: dir }, names: /CONFIG_FILE .* is a directory/ },
  { env: { CONFIG_FILE: notJson }, names: /CONFIG_FILE ".*settings\.txt" is not JSON/, never: 'hunter2' },
  // A file outside anything of the server's, readable but not JSON: never quoted.
  { env: { CONFIG_FILE: '/etc/passwd' }, names: /CONFIG_FILE "\/etc\/passwd" is not JSON/, never: 'root:' },
  { env: { CONFIG_FILE: array }, names: /CONFIG_FILE .* must hold a JSON object/ },
  { env: { CONFIG_FILE: badInFile }, names: /DATABASE_POOL_SIZE must be a whole number .* got "eighty"/ },
  { env: { WAREHOUSE: notJson }, names: /WAREHOUSE ".*settings\.txt" cannot be used .*: it is a file/ },
  // The idempotency store's settings: every combination that means nothing is refused, and the URL (which may
  // hold a password) is never printed.
  {
    env: { IDEMPOTENCY_STORE: 'dynamo' },
    names: /IDEMPOTENCY_STORE must be one of sql, memory, redis, got "dynamo"/,
  },
  {
    env: { IDEMPOTENCY_STORE: 'memory', IDEMPOTENCY_STORE_URL: 'redis://:m3m-secret@127.0.0.1:6379' },
    names: /IDEMPOTENCY_STORE_URL cannot be used with IDEMPOTENCY_STORE=memory/,
    never: 'm3m-secret',
  },
  {
    env: { IDEMPOTENCY_STORE: 'redis' },
    names: /IDEMPOTENCY_STORE=redis needs IDEMPOTENCY_STORE_URL: redis:\/\//,
  },
  {
    env: { IDEMPOTENCY_STORE_URL: 'redis://default:r3d-secret@127.0.0.1:6379' },
    names: /IDEMPOTENCY_STORE_URL is a Redis URL, but IDEMPOTENCY_STORE is sql \(the default\)/,
    never: 'r3d-secret',
  },
  {
    env: { IDEMPOTENCY_STORE: 'sql', IDEMPOTENCY_STORE_URL: 'redis+cluster://u:c1u-secret@10.0.0.1:7000' },
    names: /IDEMPOTENCY_STORE_URL is a Redis URL, but IDEMPOTENCY_STORE is sql: /,
    never: 'c1u-secret',
  },
  {
    env: { IDEMPOTENCY_STORE: 'redis', IDEMPOTENCY_STORE_URL: 'postgres://u:pg-s3cret@db/idem' },
    names:
      /IDEMPOTENCY_STORE_URL must be redis:\/\/.* with IDEMPOTENCY_STORE=redis; got a "postgres:" URL \(a database URL is for IDEMPOTENCY_STORE=sql\)/,
    never: 'pg-s3cret',
  },
  {
    env: { IDEMPOTENCY_STORE: 'redis', IDEMPOTENCY_STORE_URL: 'http://x:h77p-secret@evil.example/' },
    names: /IDEMPOTENCY_STORE_URL must be redis:\/\/.*got a "http:" URL$/,
    never: 'h77p-secret',
  },
  {
    env: { IDEMPOTENCY_STORE_URL: 'ftp://admin:ftp-s3cret@db.example/x' },
    names: /IDEMPOTENCY_STORE_URL must be sqlite:<file>.*"ftp:"/,
    never: 'ftp-s3cret',
  },
  {
    env: { IDEMPOTENCY_STORE_URL: 'postgres://u:n0db-secret@127.0.0.1:5432' },
    names: /IDEMPOTENCY_STORE_URL names no database/,
    never: 'n0db-secret',
  },
  {
    env: {
      DATABASE_URL: 'sqlite::memory:',
      IDEMPOTENCY_STORE_URL: 'sqlite::memory:',
      IDEMPOTENCY_STORE: 'memory',
    },
    names: /IDEMPOTENCY_STORE_URL cannot be used with IDEMPOTENCY_STORE=memory/,
  },
  {
    env: {
      DATABASE_URL: 'postgres://u:same-s3cret@127.0.0.1:5432/catalog',
      IDEMPOTENCY_STORE_URL: 'postgresql://other:same-s3cret@127.0.0.1/catalog',
    },
    names: /IDEMPOTENCY_STORE_URL names the catalog's own database: leave it unset/,
    never: 'same-s3cret',
  },
  {
    env: {
      DATABASE_URL: `sqlite:${join(dir, 'c.db')}`,
      IDEMPOTENCY_STORE_URL: `file:${join(dir, '.', 'c.db')}`,
    },
    names: /IDEMPOTENCY_STORE_URL names the catalog's own database/,
  },
  {
    env: { IDEMPOTENCY_STORE: 'redis', IDEMPOTENCY_STORE_URL: 'redis://:bad-s3cret@127.0.0.1:6379/0?tls=1' },
    names: /IDEMPOTENCY_STORE_URL must have no query or fragment/,
    never: 'bad-s3cret',
  },
  {
    env: { IDEMPOTENCY_STORE: 'redis', IDEMPOTENCY_STORE_URL: 'redis://:p4th-secret@127.0.0.1:6379/idem/x' },
    names: /IDEMPOTENCY_STORE_URL may name a Redis database only by its number/,
    never: 'p4th-secret',
  },
  {
    env: { IDEMPOTENCY_STORE: 'redis', IDEMPOTENCY_STORE_URL: 'redis:no-slashes-s3cret' },
    names: /IDEMPOTENCY_STORE_URL is not a valid redis:\/\/ URL/,
    never: 'no-slashes-s3cret',
  },
  {
    // A newline a URL parser would drop (and a log would print on a line of its own).
    env: {
      IDEMPOTENCY_STORE: 'redis',
      IDEMPOTENCY_STORE_URL: 'redis://:nl-s3cret@127.0.0.1:6379\nX-Injected: 1',
    },
    names: /IDEMPOTENCY_STORE_URL must not hold spaces or control characters/,
    never: 'nl-s3cret',
  },
  {
    env: { IDEMPOTENCY_STORE: 'redis', IDEMPOTENCY_STORE_URL: 'redis+cluster://:cl-s3cret@10.0.0.1:7000/0' },
    names: /IDEMPOTENCY_STORE_URL must name nodes only/,
    never: 'cl-s3cret',
  },
  {
    env: {
      IDEMPOTENCY_STORE: 'redis',
      IDEMPOTENCY_STORE_URL: 'redis+cluster://:cl-s3cret@10.0.0.1,10.0.0.2:7000',
    },
    names: /IDEMPOTENCY_STORE_URL has a node that is not host:port/,
    never: 'cl-s3cret',
  },
  {
    env: {
      IDEMPOTENCY_STORE: 'redis',
      IDEMPOTENCY_STORE_URL: `redis+cluster://${Array.from({ length: 5000 }, (_, i) => `h${i}:7000`).join(',')}`,
    },
    names: /IDEMPOTENCY_STORE_URL names more than 64 nodes/,
    never: 'h4999',
  },
  {
    env: { IDEMPOTENCY_STORE: 'redis', IDEMPOTENCY_STORE_URL: 'redis+cluster://10.0.0.1:99999' },
    names: /IDEMPOTENCY_STORE_URL has a node that is not host:port/,
  },
  {
    env: { IDEMPOTENCY_STORE: 'redis', IDEMPOTENCY_STORE_URL: 'redis+cluster://u:%zz@10.0.0.1:7000' },
    names: /IDEMPOTENCY_STORE_URL has credentials that are not percent-encoded properly/,
  },
  {
    env: { IDEMPOTENCY_STORE: 'memory', IDEMPOTENCY_POOL_SIZE: '4' },
    names: /IDEMPOTENCY_POOL_SIZE is the pool of a separate SQL store database/,
  },
  { env: { IDEMPOTENCY_POOL_SIZE: '4' }, names: /IDEMPOTENCY_POOL_SIZE is the pool of a separate SQL store/ },
  {
    env: { IDEMPOTENCY_STORE_URL: 'postgres://127.0.0.1/idem', IDEMPOTENCY_POOL_SIZE: '0' },
    names: /IDEMPOTENCY_POOL_SIZE must be a whole number of at least 1, got "0"/,
  },
  {
    env: {
      IDEMPOTENCY_STORE: 'redis',
      IDEMPOTENCY_STORE_URL: 'redis://127.0.0.1',
      IDEMPOTENCY_STORE_PREFIX: 'a{b}',
    },
    names: /IDEMPOTENCY_STORE_PREFIX must be 1 to 200 visible ASCII characters without \{ or \}/,
  },
  {
    env: { IDEMPOTENCY_STORE_PREFIX: 'catalog:' },
    names: /IDEMPOTENCY_STORE_PREFIX is the Redis store's key prefix/,
  },
  { env: { WAREHOUSE: join(notJson, 'sub') }, names: /WAREHOUSE .* cannot be used .*: a file stands/ },
];

describe('a bad setting stops the server with one line and exit code 2', () => {
  test.each(cases)(
    '$env',
    async ({ env, names, never }) => {
      const { code, stderr, stdout } = await start(env);
      expect(code, stderr + stdout).toBe(2);
      const lines = stderr.split('\n').filter((line) => line !== '');
      expect(lines, stderr).toHaveLength(1);
      expect(stderr).not.toMatch(/^\s+at /m);
      expect(lines[0]).toMatch(/^reference-server: /);
      expect(lines[0]).toMatch(names);
      expect((lines[0] as string).length).toBeLessThan(300);
      expect(stdout).toBe('');
      if (never !== undefined) expect(stderr).not.toContain(never);
    },
    30_000,
  );

  test('a good setting still starts (the checks refuse nothing valid)', async () => {
    const { code, stdout } = await start({
      PORT: '0',
      CONFIG_FILE: '',
      IDEMPOTENCY_KEY_LIFETIME: 'PT1H30M',
      LOG_LEVEL: 'info',
      DATABASE_URL: `sqlite:${join(dir, 'good.db')}`,
      // Stops itself: an unusable host is the test's way to end after the settings were all read.
      HOST: '203.0.113.1',
    });
    expect(code).toBe(1);
    expect(stdout).toContain('');
  }, 30_000);

  test.each([
    { IDEMPOTENCY_STORE: 'memory' },
    {
      IDEMPOTENCY_STORE: 'sql',
      IDEMPOTENCY_STORE_URL: `sqlite:${join(dir, 'records.db')}`,
      IDEMPOTENCY_POOL_SIZE: '3',
    },
    { IDEMPOTENCY_STORE: 'redis', IDEMPOTENCY_STORE_URL: 'rediss://user:pw@127.0.0.1:6380/2' },
    {
      IDEMPOTENCY_STORE: 'redis',
      IDEMPOTENCY_STORE_URL: 'REDIS+CLUSTER://user:p%40ss@127.0.0.1:7001,[::1]:7002/',
      IDEMPOTENCY_STORE_PREFIX: 'catalog-a:idem:',
    },
  ])(
    'good store settings start: %o',
    async (env) => {
      const { code, stderr } = await start({ ...env, HOST: '203.0.113.1' });
      expect(stderr).toMatch(/cannot listen on 203\.0\.113\.1/);
      expect(code).toBe(1);
    },
    30_000,
  );
});
