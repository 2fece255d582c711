import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { loadConfig, parseDuration } from '../src/config.js';
import { checkResponse } from './support/openapi.js';
import { call, type Node, schema, startNode } from './support/server.js';

let node: Node;
beforeAll(async () => {
  node = await startNode('sqlite::memory:');
  await call(node.url, 'POST', '/v1/namespaces', { body: { namespace: ['fv'] } });
});
afterAll(async () => node.close());

async function checked(method: string, path: string, body?: unknown) {
  const answer = await call(node.url, method, path, body === undefined ? {} : { body });
  expect(checkResponse(method, path, answer.status, answer.text)).toEqual([]);
  return answer;
}

describe('format versions', () => {
  test('a v1 table carries schema and partition-spec; upgrading to v2 drops them, to v3 adds next-row-id', async () => {
    const v1 = await checked('POST', '/v1/namespaces/fv/tables', {
      name: 'old',
      schema,
      'partition-spec': { fields: [{ name: 'id_bucket', transform: 'bucket[4]', 'source-id': 1 }] },
      properties: { 'format-version': '1' },
    });
    const metadata = v1.json().metadata;
    expect(metadata['format-version']).toBe(1);
    expect(metadata.schema['schema-id']).toBe(0);
    expect(metadata['partition-spec']).toEqual([
      { name: 'id_bucket', transform: 'bucket[4]', 'source-id': 1, 'field-id': 1000 },
    ]);
    expect(metadata['last-partition-id']).toBe(1000);
    const v2 = await checked('POST', '/v1/namespaces/fv/tables/old', {
      requirements: [],
      updates: [{ action: 'upgrade-format-version', 'format-version': 2 }],
    });
    expect(v2.json().metadata).not.toHaveProperty('schema');
    expect(v2.json().metadata).not.toHaveProperty('partition-spec');
    const v3 = await checked('POST', '/v1/namespaces/fv/tables/old', {
      requirements: [],
      updates: [{ action: 'upgrade-format-version', 'format-version': 3 }],
    });
    expect(v3.json().metadata['next-row-id']).toBe(0);
    const down = await call(node.url, 'POST', '/v1/namespaces/fv/tables/old', {
      body: { requirements: [], updates: [{ action: 'upgrade-format-version', 'format-version': 2 }] },
    });
    expect(down.status).toBe(400);
  });

  test('a new partition spec gets the next field ids; an unknown update action is a 400', async () => {
    await checked('POST', '/v1/namespaces/fv/tables', { name: 'specs', schema });
    const added = await checked('POST', '/v1/namespaces/fv/tables/specs', {
      requirements: [{ type: 'assert-last-assigned-partition-id', 'last-assigned-partition-id': 999 }],
      updates: [
        { action: 'add-spec', spec: { fields: [{ name: 'a', transform: 'identity', 'source-id': 1 }] } },
        { action: 'set-default-spec', 'spec-id': -1 },
      ],
    });
    expect(added.json().metadata).toMatchObject({ 'default-spec-id': 1, 'last-partition-id': 1000 });
    const unknown = await call(node.url, 'POST', '/v1/namespaces/fv/tables/specs', {
      body: { requirements: [], updates: [{ action: 'make-it-fast' }] },
    });
    expect(unknown.status).toBe(400);
    expect(unknown.json().error.message).toMatch(/make-it-fast/);
  });
});

describe('settings', () => {
  test('durations parse as ISO-8601', () => {
    expect(parseDuration('PT30M')).toBe(1_800_000);
    expect(parseDuration('PT24H')).toBe(86_400_000);
    expect(parseDuration('P1DT1H30M15S')).toBe(91_815_000);
    expect(() => parseDuration('30m')).toThrow(/ISO-8601/);
    expect(() => parseDuration('PT')).toThrow();
  });

  test('a config file provides settings; the environment overrides it', () => {
    const file = join(mkdtempSync(join(tmpdir(), 'idem-config-')), 'catalog.json');
    writeFileSync(
      file,
      JSON.stringify({ PORT: 9000, IDEMPOTENCY_KEY_LIFETIME: 'PT1H', AUTH_TOKENS: 't=ana' }),
    );
    const config = loadConfig({ CONFIG_FILE: file, PORT: '9001' });
    expect(config.port).toBe(9001);
    expect(config.idempotency.lifetimeMs).toBe(3_600_000);
    expect(config.tokens.get('t')).toBe('ana');
    expect(() => loadConfig({ AUTH_TOKENS: 'broken' })).toThrow(/token=principal/);
  });

  test('purge and file-read settings have defaults; a number that is not one, or a principal the store cannot hold, fails at startup', () => {
    const defaults = loadConfig({});
    expect(defaults.idempotency.purge).toEqual({ enabled: true, intervalMs: 60_000, batchSize: 1_000 });
    expect(defaults.idempotency.graceMs).toBe(60_000);
    expect(defaults.metadataFiles).toEqual({ maxBytes: 16 * 1024 * 1024, readTimeoutMs: 10_000 });
    const set = loadConfig({ IDEMPOTENCY_PURGE_ENABLED: 'off', IDEMPOTENCY_PURGE_INTERVAL_MS: '500' });
    expect(set.idempotency.purge).toMatchObject({ enabled: false, intervalMs: 500 });
    expect(() => loadConfig({ IDEMPOTENCY_PURGE_INTERVAL_MS: 'soon' })).toThrow(
      /IDEMPOTENCY_PURGE_INTERVAL_MS/,
    );
    expect(() => loadConfig({ METADATA_MAX_BYTES: '0' })).toThrow(/at least 1/);
    expect(() => loadConfig({ AUTH_TOKENS: `t=${'p'.repeat(200)}` })).toThrow(/at most 126/);
    expect(() => loadConfig({ AUTH_TOKENS: 't=a\u0000b' })).toThrow(/control characters/);
  });
});
