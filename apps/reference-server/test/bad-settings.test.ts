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
});
