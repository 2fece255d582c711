import type { StoredResponse } from '@idem/core';
import { describe, expect, test } from 'vitest';
import { withoutConfig } from '../src/idempotency/stored-answer.js';

const JSON_HEADERS = { 'content-type': 'application/json; charset=utf-8' };
const stored = (body: string): StoredResponse => ({
  status: 200,
  headers: JSON_HEADERS,
  body: new TextEncoder().encode(body),
});
const text = (response: StoredResponse) => new TextDecoder().decode(response.body ?? new Uint8Array());

// The plugin's `redact`: a load result's `config` (where a catalog vends credentials) is never stored.
describe('withoutConfig', () => {
  const metadata = '{"table-uuid":"u","properties":{"config":"a property named config"}}';

  test('empties a config that holds anything', () => {
    const response = stored(`{"metadata-location":"l","metadata":${metadata},"config":{"token":"secret"}}`);
    expect(text(withoutConfig(response))).toBe(
      `{"metadata-location":"l","metadata":${metadata},"config":{}}`,
    );
  });

  test('a body with an empty config, or none, is kept as it is (the same object)', () => {
    for (const body of [
      `{"metadata-location":"l","metadata":${metadata},"config":{}}`,
      `{"metadata-location":"l","metadata":${metadata}}`,
      '{"metadata-location":"l","metadata":{"table-uuid":"u"}}',
      '{"namespace":["a"],"properties":{}}',
    ]) {
      const response = stored(body);
      expect(withoutConfig(response)).toBe(response);
    }
  });

  test('a body inside a larger buffer is read where it is', () => {
    const bytes = new TextEncoder().encode(`xx{"metadata-location":"l","metadata":{},"config":{"k":"v"}}yy`);
    const response: StoredResponse = { status: 200, headers: JSON_HEADERS, body: bytes.subarray(2, -2) };
    expect(text(withoutConfig(response))).toBe('{"metadata-location":"l","metadata":{},"config":{}}');
    const clean: StoredResponse = {
      ...response,
      body: new TextEncoder().encode('xx"config"yy{"a":1}').subarray(12),
    };
    expect(withoutConfig(clean)).toBe(clean);
  });
});
