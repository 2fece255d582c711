import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { splitScope } from '../src/idempotency/scope.js';
import { call, type Node, newKey, startNode } from './support/server.js';

// The operator's `idem` command (packages/cli) on the catalog's own records: the scope its README gives for the
// catalog, `<prefix>\x1f<principal>`, finds them, and so does every scope `idem list` shows.

const BIN = fileURLToPath(new URL('../../../packages/cli/dist/bin.js', import.meta.url));
const README = fileURLToPath(new URL('../../../packages/cli/README.md', import.meta.url));

function idem(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [BIN, ...args], { env: { PATH: process.env.PATH } }, (error, stdout, stderr) =>
      resolve({ code: error === null ? 0 : Number(error.code), stdout, stderr }),
    );
  });
}

/** The SCOPE cell of the `idem list` row of `key` (no scope here holds a space). */
async function listedScope(url: string, key: string): Promise<string> {
  const listed = await idem(['list', url, '--no-color']);
  expect(listed.code, listed.stderr).toBe(0);
  const row = listed.stdout.split('\n').find((line) => line.includes(key)) ?? '';
  return row.trim().split(/\s+/)[1] ?? '';
}

let dir: string;
beforeAll(() => {
  if (!existsSync(BIN)) throw new Error(`${BIN} is missing: build @idem/cli first`);
  dir = mkdtempSync(join(tmpdir(), 'idem-cli-catalog-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('without AUTH_TOKENS (the principal is anonymous), on the routes without a prefix', () => {
  let url: string;
  let node: Node;
  let key: string;
  beforeAll(async () => {
    url = `sqlite:${join(dir, 'anonymous.db')}`;
    node = await startNode(url);
    key = newKey();
    const created = await call(node.url, 'POST', '/v1/namespaces', { key, body: { namespace: ['sales'] } });
    expect(created.status, created.text).toBe(200);
  });
  afterAll(() => node?.close());

  test("the CLI README's command, `idem inspect --scope '\\x1fanonymous'`, finds the record", async () => {
    expect(readFileSync(README, 'utf8')).toContain(
      `idem inspect sqlite:./data/catalog.db --scope '\\x1fanonymous'`,
    );
    const ran = await idem(['inspect', url, '--scope', '\\x1fanonymous', '--key', key, '--json']);
    expect(ran.code, ran.stderr).toBe(0);
    const { record } = JSON.parse(ran.stdout);
    expect(record.scope).toBe('\u001fanonymous'); // --json: as stored
    expect(splitScope(record.scope)).toEqual({ prefix: '', principal: 'anonymous' });
  });

  test("`idem stats --scope '\\x1fanonymous'` counts the completed record", async () => {
    const ran = await idem(['stats', url, '--scope', '\\x1fanonymous', '--json']);
    expect(ran.code, ran.stderr).toBe(0);
    expect(JSON.parse(ran.stdout)).toMatchObject({ inFlight: 0, completed: 1 });
  });

  test('the principal alone is not the scope: it finds nothing, as the README says', async () => {
    const ran = await idem(['inspect', url, '--scope', 'anonymous', '--key', key]);
    expect(ran.code).toBe(3);
    expect(ran.stderr).toBe(`no record for key ${key} in scope "anonymous"\n`);
  });

  test('the scope `idem list` shows, given back to `idem inspect` and `idem stats`, finds the record', async () => {
    const scope = await listedScope(url, key);
    expect(scope).toBe('\\x1fanonymous');
    const ran = await idem(['inspect', url, '--scope', scope, '--key', key]);
    expect(ran.code, `scope as listed: ${scope}; ${ran.stderr}`).toBe(0);
    expect(ran.stdout).toMatch(/^scope {8}\\x1fanonymous$/m);
    const counted = await idem(['stats', url, '--scope', scope, '--json']);
    expect(JSON.parse(counted.stdout)).toMatchObject({ completed: 1 });
  });

  test('the scope given with the control character itself finds the record too', async () => {
    const ran = await idem(['inspect', url, '--scope', '\u001fanonymous', '--key', key]);
    expect(ran.code, ran.stderr).toBe(0);
  });
});

describe('a catalog prefix and a principal with a backslash in it', () => {
  let url: string;
  let node: Node;
  let key: string;
  beforeAll(async () => {
    url = `sqlite:${join(dir, 'prefixed.db')}`;
    node = await startNode(url, { AUTH_TOKENS: 'token-of-alice=CORP\\alice' });
    key = newKey();
    const created = await call(node.url, 'POST', '/v1/sales-eu/namespaces', {
      key,
      token: 'token-of-alice',
      body: { namespace: ['sales'] },
    });
    expect(created.status, created.text).toBe(200);
  });
  afterAll(() => node?.close());

  test('`idem list` shows `<prefix>\\x1f<principal>`, the backslash escaped, and that finds the record', async () => {
    const scope = await listedScope(url, key);
    expect(scope).toBe('sales-eu\\x1fCORP\\\\alice');
    const ran = await idem(['inspect', url, '--scope', scope, '--key', key, '--json']);
    expect(ran.code, `scope as listed: ${scope}; ${ran.stderr}`).toBe(0);
    const { record } = JSON.parse(ran.stdout);
    expect(record.scope).toBe('sales-eu\u001fCORP\\alice');
    expect(splitScope(record.scope)).toEqual({ prefix: 'sales-eu', principal: 'CORP\\alice' });
    const counted = await idem(['stats', url, '--scope', scope, '--json']);
    expect(JSON.parse(counted.stdout)).toMatchObject({ completed: 1 });
  });

  test('the backslash given alone is refused as a usage error, not taken for another scope', async () => {
    const ran = await idem(['inspect', url, '--scope', 'sales-eu\\x1fCORP\\alice', '--key', key]);
    expect(ran.code).toBe(2);
    expect(ran.stderr).toMatch(/--scope: the backslash at character 17 starts no escape/);
  });
});
