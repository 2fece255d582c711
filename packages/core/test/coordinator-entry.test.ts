import { ErrorCode, isIdemError } from '@idem/core';
import { describe, expect, test } from 'vitest';
import { expectExecute, expectReject, KEY, post, setup } from './support/coordinator.js';

describe('coordinator: which requests it covers (design: The coordinator)', () => {
  test('disabled: every request passes through, the store is never called', async () => {
    const { idem, backend } = setup({ enabled: false, required: true });
    expect(await idem.begin(post())).toEqual({ action: 'proceed', reason: 'disabled' });
    expect(await idem.begin(post({ key: 'not a uuid' }))).toEqual({ action: 'proceed', reason: 'disabled' });
    expect(idem.covers('POST')).toBe(false);
    expect(backend.calls).toEqual([]);
  });

  test('a method that is not covered passes through, key or not', async () => {
    const { idem, backend } = setup({ required: true });
    expect(await idem.begin(post({ method: 'GET' }))).toEqual({ action: 'proceed', reason: 'method' });
    expect(await idem.begin(post({ method: 'GET', key: undefined }))).toEqual({
      action: 'proceed',
      reason: 'method',
    });
    expect(backend.calls).toEqual([]);
  });

  test.each(['POST', 'PUT', 'PATCH', 'DELETE', 'post'])('%s is covered by default', async (method) => {
    const { idem } = setup();
    expect(idem.covers(method)).toBe(true);
    expectExecute(await idem.begin(post({ method })));
  });

  test('the covered methods are configurable', async () => {
    const { idem } = setup({ methods: ['post'] });
    expect(idem.covers('PUT')).toBe(false);
    expect(await idem.begin(post({ method: 'PUT' }))).toEqual({ action: 'proceed', reason: 'method' });
  });

  test('no header and not required: pass through without a store call', async () => {
    const { idem, backend } = setup();
    expect(await idem.begin(post({ key: undefined }))).toEqual({ action: 'proceed', reason: 'no-key' });
    expect(backend.calls).toEqual([]);
  });

  test('no header and required: 400 IDEMPOTENCY_KEY_MISSING, store untouched', async () => {
    const { idem, backend } = setup({ required: true });
    const error = expectReject(await idem.begin(post({ key: undefined })), 400, ErrorCode.KeyMissing);
    expect(isIdemError(error)).toBe(true);
    expect(error.toJSON()).toEqual({ error: { code: 'IDEMPOTENCY_KEY_MISSING', message: error.message } });
    expect(backend.calls).toEqual([]);
  });

  test.each([
    ['a header sent twice', [KEY, KEY]],
    ['two values in one header', `${KEY}, ${KEY}`],
    ['a UUIDv4', '9b2f1c1e-3f4a-4b5c-8d6e-7f8091a2b3c4'],
    ['garbage', 'hello'],
    ['an empty value', ''],
  ])('%s: 400 IDEMPOTENCY_KEY_INVALID, store untouched', async (_, key) => {
    const { idem, backend } = setup();
    const error = expectReject(await idem.begin(post({ key })), 400, ErrorCode.KeyInvalid);
    expect(error.message).toMatch(/idempotency-key/);
    expect(backend.calls).toEqual([]);
    expect(backend.records.size).toBe(0);
  });

  test('the key format and header name are options', async () => {
    const { idem } = setup({ keyFormat: 'token', headerName: 'X-Request-Key' });
    expect(idem.headerName).toBe('x-request-key');
    expectExecute(await idem.begin(post({ key: 'order-42' })));
  });

  test('UUID keys are normalized: upper and lower case name one record', async () => {
    const { idem, backend } = setup();
    const execution = expectExecute(await idem.begin(post({ key: KEY.toUpperCase() })));
    expect(execution.key).toBe(KEY);
    expect(backend.only()?.key).toBe(KEY);
  });

  test('the status of each of its own answers is an option (Iceberg answers a reused key with 400)', async () => {
    const { idem } = setup({ statuses: { keyReused: 400, invalidKey: 422 } });
    expectReject(await idem.begin(post({ key: 'x' })), 422, ErrorCode.KeyInvalid);
    await idem.begin(post());
    expectReject(await idem.begin(post({ body: { other: true } })), 400, ErrorCode.KeyReused);
  });

  test('an allow-list that names a secret header is refused at creation', () => {
    expect(() => setup({ replayHeaders: ['content-type', 'Set-Cookie'] })).toThrow(/set-cookie/);
    expect(() => setup({ replayHeaders: ['content-type', '__Proto__'] })).toThrow(/__proto__/);
    expect(() => setup({ leaseMs: 0 })).toThrow(RangeError);
  });
});
