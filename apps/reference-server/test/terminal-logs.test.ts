import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, test } from 'vitest';
import { type ServerProcess, startServerProcess } from './support/process.js';
import { newKey, schema } from './support/server.js';

// The catalog's terminal: one line per request (method, path, status, ms with at most 2 decimals, the key and
// whether it was replayed, a refusal's error type and message), a start line naming the database (no
// password) and the warehouse. Before: 12 requests made 241 lines (a keyed create was 4 entries, ~34 lines:
// incoming request, two audit entries, request completed, each with its objects), times like
// 20.64887599999929, and a 400 without its reason.

const dir = mkdtempSync(join(tmpdir(), 'idem-terminal-'));
const running: ServerProcess[] = [];
afterAll(async () => {
  await Promise.all(running.map((server) => server.stop()));
  rmSync(dir, { recursive: true, force: true });
});

/** 12 representative requests: reads, keyed and unkeyed creates, a replay, a commit, a 400, a 404, a drop. */
async function twelve(url: string): Promise<void> {
  const key = newKey();
  const json = { 'content-type': 'application/json' };
  const send = async (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) => {
    const answer = await fetch(url + path, {
      method,
      headers: body === undefined ? headers : { ...json, ...headers },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    await answer.arrayBuffer();
  };
  await send('GET', '/v1/config');
  await send('POST', '/v1/namespaces', { namespace: ['sales'] }, { 'idempotency-key': key });
  await send('POST', '/v1/namespaces', { namespace: ['sales'] }, { 'idempotency-key': key });
  await send('POST', '/v1/namespaces', { namespace: ['ops'] });
  await send('GET', '/v1/namespaces');
  await send(
    'POST',
    '/v1/namespaces/sales/tables',
    { name: 'orders', schema },
    { 'idempotency-key': newKey() },
  );
  await send('GET', '/v1/namespaces/sales/tables/orders');
  await send('POST', '/v1/namespaces/sales/tables/orders', {
    requirements: [],
    updates: [{ action: 'set-properties', updates: { owner: 'ana' } }],
  });
  await send('POST', '/v1/namespaces', { namespace: [] });
  // A hostile path: escaped on its line, never a second line or a terminal escape.
  await send('GET', '/v1/namespaces/no%0Aforged%1B%5B31m');
  await send('DELETE', '/v1/namespaces/sales/tables/orders', undefined, { 'idempotency-key': newKey() });
  await send('GET', '/ready');
}

async function run(format: 'pretty' | 'json') {
  const server = startServerProcess({
    DATABASE_URL: `sqlite:${join(dir, `${format}.db`)}`,
    WAREHOUSE: join(dir, `warehouse-${format}`),
    LOG_FORMAT: format,
    LOG_LEVEL: 'info',
    IDEMPOTENCY_PURGE_ENABLED: 'false',
  });
  running.push(server);
  const url = await server.url;
  await twelve(url);
  await server.waitFor(/\/ready 200/);
  await server.stop();
  return server.lines.filter((line) => line !== '');
}

describe('the terminal (LOG_FORMAT=pretty)', () => {
  test('12 requests are 12 lines and the start line', async () => {
    const lines = await run('pretty');
    expect(lines, lines.join('\n')).toHaveLength(13);
    const [start, ...requests] = lines as [string, ...string[]];
    expect(start).toMatch(
      new RegExp(
        `Server listening at http://127\\.0\\.0\\.1:\\d+ · database sqlite:${dir}/pretty\\.db \\(open\\) · warehouse ${dir}/warehouse-pretty$`,
      ),
    );
    for (const line of requests)
      expect(line).toMatch(
        /^\[\d\d:\d\d:\d\d\.\d{3}\] (INFO|WARN): (GET|POST|DELETE) \/\S* \d{3} \d+(\.\d{1,2})? ms/,
      );
    // No long float times anywhere.
    expect(lines.join('\n')).not.toMatch(/\d\.\d{3,}(?! *\])/);
    expect(requests[1]).toMatch(/POST \/v1\/namespaces 200 \S+ ms key \S+$/);
    expect(requests[2]).toMatch(/POST \/v1\/namespaces 200 \S+ ms key \S+ replayed$/);
    expect(requests[8]).toMatch(
      /POST \/v1\/namespaces 400 \S+ ms BadRequestException: body\/namespace must have at least one level$/,
    );
    expect(requests[9]).toMatch(
      /GET \/v1\/namespaces\/no%0Aforged%1B%5B31m 400 \S+ ms BadRequestException: .*control characters/,
    );
    expect(lines.join('\n')).not.toContain('\u001b');
  }, 60_000);
});

describe('the JSON log keeps the same facts, as fields', () => {
  test('one request entry per request, with method, url, status, ms, key and reason; audit entries too', async () => {
    const entries = (await run('json')).map((line) => JSON.parse(line));
    const start = entries.find((entry) => entry.address !== undefined);
    expect(start).toMatchObject({ database: `sqlite:${dir}/json.db`, warehouse: `${dir}/warehouse-json` });
    const requests = entries.filter((entry) => entry.statusCode !== undefined);
    expect(requests).toHaveLength(12);
    for (const entry of requests) {
      expect(entry.responseTimeMs).toBeTypeOf('number');
      expect(String(entry.responseTimeMs)).toMatch(/^\d+(\.\d{1,2})?$/);
      expect(entry.reqId).toBeTypeOf('string');
    }
    expect(requests[2]).toMatchObject({ method: 'POST', url: '/v1/namespaces', replayed: true });
    expect(requests[8]).toMatchObject({
      statusCode: 400,
      errorType: 'BadRequestException',
      errorMessage: 'body/namespace must have at least one level',
    });
    // The audit trail stays in the JSON log: a machine reads it.
    expect(entries.filter((entry) => entry.audit === 'idempotency').length).toBeGreaterThanOrEqual(5);
  }, 60_000);
});
