import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { afterAll, describe, expect, test } from 'vitest';
import { buildApp } from '../src/app.js';
import { loadConfig } from '../src/config.js';
import type { CatalogDatabase } from '../src/database/catalog-database.js';
import { openDatabase } from '../src/database/open.js';
import { databaseOptions } from '../src/database/options.js';
import { whyUnreachable } from '../src/database/unreachable.js';
import { redactedUrl, SettingError } from '../src/setting-error.js';
import { PG_URL } from './support/databases.js';
import { type ServerProcess, startServerProcess } from './support/process.js';

// Review of issue 19 (items 2, 3, 4, 13): settings valid but refused (or accepted then misused), secrets in
// lines and messages, the one-line request log under hostile input, disconnects and timeouts.

const dir = mkdtempSync(join(tmpdir(), 'idem-review19-'));
const running: ServerProcess[] = [];
const cleanups: (() => Promise<void>)[] = [];
afterAll(async () => {
  await Promise.all(running.map((server) => server.stop()));
  for (const cleanup of cleanups) await cleanup();
  rmSync(dir, { recursive: true, force: true });
});

const base = { WAREHOUSE: join(dir, 'warehouse'), LOG_LEVEL: 'silent' };

describe('settings', () => {
  test.each([
    ['PORT', '0'],
    ['DATABASE_URL', 'sqlite::memory:'],
    ['DATABASE_URL', 'file:./data/x.db'],
    ['DATABASE_URL', 'sqlite:./data/x.db'],
    ['DATABASE_URL', 'postgres://postgres@127.0.0.1:5432/test?sslmode=disable'],
    ['DATABASE_URL', 'postgres://postgres@[::1]:5432/test'],
    ['DATABASE_URL', 'mysql://root:p@ss@127.0.0.1:3306/test'],
    ['DATABASE_URL', 'mysql://root:p%40ss@127.0.0.1:3306/test'],
    ['HOST', '::'],
    ['HOST', '[::1]'],
  ])('%s=%s is accepted', (name, value) => {
    expect(() => loadConfig({ ...base, [name]: value })).not.toThrow();
  });

  test.each([
    ['PORT', '65536'],
    ['PORT', '-1'],
    ['PORT', '1e3'],
    ['DATABASE_URL', 'postgres://h'],
    ['DATABASE_URL', '/tmp/x.db'],
  ])('%s=%s is refused', (name, value) => {
    expect(() => loadConfig({ ...base, [name]: value })).toThrow(SettingError);
  });

  // The scheme is matched case-insensitively by the settings (RFC 3986: schemes are case-insensitive), but was
  // opened case-sensitively: `SQLITE:<file>` opened a file named `SQLITE:<file>` and `POSTGRES://…` a SQLite
  // file named after the URL, the very thing the check was to prevent.
  test('a DATABASE_URL whose scheme is in capitals opens what it names', async () => {
    const file = join(dir, 'capitals.db');
    const sqlite = await openDatabase(loadConfig({ ...base, DATABASE_URL: `SQLITE:${file}` }).databaseUrl);
    await sqlite.close();
    expect(existsSync(file)).toBe(true);
    const upper = PG_URL.replace(/^postgres(ql)?:/, 'POSTGRES:');
    const config = loadConfig({ ...base, DATABASE_URL: upper });
    const pg: CatalogDatabase = await openDatabase(config.databaseUrl, databaseOptions(config));
    try {
      expect(pg.dialect).toBe('postgres');
    } finally {
      await pg.close();
    }
  }, 30_000);
});

describe('secrets', () => {
  test.each([
    'postgres://u:hunter2@h:5432/db',
    'postgres://u:hun%40ter2@h:5432/db',
    'mysql://u:hun@ter2@h:3306/db',
    'postgres://u@h:5432/db?password=hunter2',
    'postgres://u@h:5432/db?sslmode=disable&PassWord=hunter2',
  ])('redactedUrl(%s) holds no password', (url) => {
    expect(redactedUrl(url)).not.toMatch(/hunter|ter2/);
  });

  test('a CONFIG_FILE whose DATABASE_URL holds a password is never echoed in the refusal', () => {
    for (const url of ['ftp://u:hunter2@h/db', 'postgres://u:hunter2@/db', 'postgres://u:hunter2@h', 'x']) {
      const file = join(dir, `settings-${Math.random()}.json`);
      writeFileSync(file, JSON.stringify({ DATABASE_URL: url, AUTH_TOKENS: 'hunter2' }));
      let message = '';
      try {
        loadConfig({ ...base, CONFIG_FILE: file });
      } catch (error) {
        message = (error as Error).message;
      }
      expect(message).not.toBe('');
      expect(message).not.toContain('hunter2');
    }
  });

  test('whyUnreachable names no password', () => {
    const error = Object.assign(new Error('connect to postgres://u:hunter2@h/db failed'), { code: 'EWHAT' });
    expect(whyUnreachable(error, 'postgres://u:hunter2@h:5432/db')).not.toContain('hunter2');
  });

  test('a server on an unreachable database with a password prints it nowhere', async () => {
    const server = startServerProcess({
      DATABASE_URL: 'postgres://postgres:hun%40ter2@127.0.0.1:1/test?password=qwertz9',
      WAREHOUSE: join(dir, 'warehouse-secret'),
      LOG_FORMAT: 'pretty',
      AUTH_TOKENS: 'tok3n-s3cret=alice',
      DATABASE_RETRY_MAX_DELAY_MS: '200',
    });
    running.push(server);
    const url = await server.url;
    await server.waitFor(/connection refused/, 2);
    await fetch(`${url}/v1/config`, { headers: { authorization: 'Bearer tok3n-s3cret' } }).then((r) =>
      r.arrayBuffer(),
    );
    await fetch(`${url}/v1/config`, { headers: { authorization: 'Bearer wrong-b34rer' } }).then((r) =>
      r.arrayBuffer(),
    );
    await server.waitFor(/GET \/v1\/config/, 2);
    const all = [...server.lines, ...server.errors].join('\n');
    expect(all).not.toMatch(/hun|ter2|%40|qwertz9|tok3n|b34rer/);
  }, 40_000);
});

/** An app on SQLite whose JSON log lines are kept. */
async function loggedApp(env: Record<string, string> = {}) {
  const config = loadConfig({
    DATABASE_URL: `sqlite:${join(dir, `log-${Math.random()}.db`)}`,
    WAREHOUSE: join(dir, 'warehouse-log'),
    LOG_LEVEL: 'info',
    LOG_FORMAT: 'json',
    ...env,
  });
  const db = await openDatabase(config.databaseUrl, databaseOptions(config));
  const out = new PassThrough();
  const lines: string[] = [];
  let pending = '';
  out.on('data', (chunk) => {
    pending += String(chunk);
    const parts = pending.split('\n');
    pending = parts.pop() ?? '';
    lines.push(...parts);
  });
  const app: FastifyInstance = await buildApp(config, db, out);
  const address = await app.listen({ host: '127.0.0.1', port: 0 });
  cleanups.push(async () => {
    await app.close();
    await db.close();
  });
  const port = Number(new URL(address).port);
  return { app, url: address, port, lines };
}

/** Send raw bytes on a new connection; resolve with what came back once it closes (or after `ms`). */
function raw(port: number, bytes: Buffer | string, ms = 3_000, endAfterWrite = false): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    let answer = '';
    socket.on('data', (chunk) => {
      answer += String(chunk);
    });
    socket.on('error', () => {});
    const timer = setTimeout(() => {
      socket.destroy();
      resolve(answer);
    }, ms);
    socket.on('close', () => {
      clearTimeout(timer);
      resolve(answer);
    });
    socket.write(bytes, () => {
      if (endAfterWrite) socket.destroy();
    });
  });
}

const until = async (check: () => boolean, ms = 5_000) => {
  const end = Date.now() + ms;
  while (!check() && Date.now() < end) await new Promise((r) => setTimeout(r, 20));
};

describe('the one-line request log', () => {
  test('a path, query and key with raw C1, ESC and CR bytes are escaped on the line', async () => {
    const { port, lines } = await loggedApp({ LOG_FORMAT: 'pretty' });
    const bytes = Buffer.concat([
      Buffer.from('GET /v1/namespaces/a'),
      Buffer.from([0x9b, 0x33, 0x31, 0x6d, 0x85]),
      Buffer.from('?q=\u001b[2J HTTP/1.1\r\nHost: x\r\nidempotency-key: k'),
      Buffer.from([0x9b, 0x85, 0x0b]),
      Buffer.from('\r\nConnection: close\r\n\r\n'),
    ]);
    await raw(port, bytes);
    await until(() => lines.some((line) => line.includes('/v1/namespaces/a')));
    const line = lines.find((l) => l.includes('/v1/namespaces/a')) ?? '';
    // biome-ignore lint/suspicious/noControlCharactersInRegex: the characters that must not be there.
    expect(line).not.toMatch(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]/);
  });

  test("a 4xx's reason is on its line, cut short, however long the client made it", async () => {
    const { url, lines } = await loggedApp();
    const long = 'x'.repeat(100_000);
    const answer = await fetch(`${url}/v1/namespaces`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ namespace: ['a'], properties: { [long]: 1 } }),
    });
    const text = await answer.text();
    expect(answer.status).toBeGreaterThanOrEqual(400);
    await until(() => lines.some((line) => line.includes('"POST"')));
    const line = JSON.parse(lines.find((l) => l.includes('"POST"')) ?? '{}');
    expect(text.length, 'the answer').toBeGreaterThan(0);
    expect(line.errorType).toBeTypeOf('string');
    expect(String(line.errorMessage).length).toBeLessThanOrEqual(300);
  });

  test('a client that disconnects mid-body makes exactly one line', async () => {
    const { port, lines } = await loggedApp();
    await raw(
      port,
      'POST /v1/namespaces HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{"namesp',
      500,
      true,
    );
    await new Promise((r) => setTimeout(r, 1_000));
    expect(lines.filter((line) => line.includes('/v1/namespaces') && line.includes('aborted')).length).toBe(
      1,
    );
    expect(lines.filter((line) => line.includes('/v1/namespaces')).length).toBe(1);
  });

  test('a request that times out mid-body makes exactly one line', async () => {
    const { port, lines } = await loggedApp({ REQUEST_TIMEOUT_MS: '500' });
    const answer = await raw(
      port,
      'POST /v1/namespaces HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{"namesp',
      4_000,
    );
    expect(answer).toMatch(/^HTTP\/1\.1 (408|400)/);
    await new Promise((r) => setTimeout(r, 300));
    expect(lines.filter((line) => line.includes('/v1/namespaces') && line.includes('aborted')).length).toBe(
      1,
    );
    expect(lines.filter((line) => line.includes('/v1/namespaces')).length).toBe(1);
  });

  test('a 304 and a HEAD make one line each', async () => {
    const { url, lines } = await loggedApp();
    const h = await fetch(`${url}/v1/namespaces/nope`, { method: 'HEAD' });
    expect(h.status).toBe(404);
    await until(() => lines.some((line) => line.includes('HEAD')));
    expect(lines.filter((line) => line.includes('"HEAD"')).length).toBe(1);
  });
});
