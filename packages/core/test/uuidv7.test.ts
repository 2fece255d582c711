import { parseIdempotencyKey, validateToken, validateUuidV7 } from '@idem/core';
import { v7 } from 'uuid';
import { describe, expect, test } from 'vitest';

const V7 = '0190b7e2-5a5d-7c3e-8f00-1234567890ab';

// [description, header value(s), expected normalized key or null for a rejection]
const cases: [string, string | string[], string | null][] = [
  ['canonical lower-case v7', V7, V7],
  ['upper-case is normalized to lower case', V7.toUpperCase(), V7],
  ['mixed case', '0190B7e2-5A5d-7C3e-8F00-1234567890aB', V7],
  ['variant nibble 8', '0190b7e2-5a5d-7c3e-8f00-1234567890ab', '0190b7e2-5a5d-7c3e-8f00-1234567890ab'],
  ['variant nibble 9', '0190b7e2-5a5d-7c3e-9f00-1234567890ab', '0190b7e2-5a5d-7c3e-9f00-1234567890ab'],
  ['variant nibble a', '0190b7e2-5a5d-7c3e-af00-1234567890ab', '0190b7e2-5a5d-7c3e-af00-1234567890ab'],
  [
    'variant nibble B (upper)',
    '0190b7e2-5a5d-7c3e-Bf00-1234567890ab',
    '0190b7e2-5a5d-7c3e-bf00-1234567890ab',
  ],
  ['structured-field quoted form', `"${V7}"`, V7],
  ['quoted upper-case', `"${V7.toUpperCase()}"`, V7],
  ['all-zero timestamp v7', '00000000-0000-7000-8000-000000000000', '00000000-0000-7000-8000-000000000000'],
  ['max timestamp v7', 'ffffffff-ffff-7fff-bfff-ffffffffffff', 'ffffffff-ffff-7fff-bfff-ffffffffffff'],
  ['a one-element header list', [V7], V7],
  ['v4', '9b2f1c1e-3f4a-4b5c-8d6e-7f8091a2b3c4', null],
  ['v1', 'c232ab00-9414-11ec-b3c8-9f6bdeced846', null],
  ['v2', '000003e8-9414-21ec-8d00-325096b39f47', null],
  ['v3', '5df41881-3aed-3515-88a7-2f4a814cf09e', null],
  ['v5', '2ed6657d-e927-568b-95e1-2665a8aea6a2', null],
  ['v6', '1ec9414c-232a-6b00-b3c8-9f6bdeced846', null],
  ['v8', '0190b7e2-5a5d-8c3e-8f00-1234567890ab', null],
  ['nil UUID', '00000000-0000-0000-0000-000000000000', null],
  ['max UUID', 'ffffffff-ffff-ffff-ffff-ffffffffffff', null],
  ['variant 0 (NCS)', '0190b7e2-5a5d-7c3e-0f00-1234567890ab', null],
  ['variant 7 (NCS)', '0190b7e2-5a5d-7c3e-7f00-1234567890ab', null],
  ['variant c (Microsoft)', '0190b7e2-5a5d-7c3e-cf00-1234567890ab', null],
  ['variant f (reserved)', '0190b7e2-5a5d-7c3e-ff00-1234567890ab', null],
  ['32 hex without hyphens', '0190b7e25a5d7c3e8f001234567890ab', null],
  ['braces', `{${V7}}`, null],
  ['urn:uuid: prefix', `urn:uuid:${V7}`, null],
  ['leading space', ` ${V7}`, null],
  ['trailing space', `${V7} `, null],
  ['inner space', '0190b7e2-5a5d-7c3e-8f00-1234567890 b', null],
  ['tab inside', '0190b7e2-5a5d-7c3e-8f00-1234\t67890ab', null],
  ['35 characters', V7.slice(0, 35), null],
  ['37 characters', `${V7}0`, null],
  ['non-hex g', '0190b7e2-5a5d-7c3e-8f00-1234567890ag', null],
  ['non-hex in the version group', '0190b7e2-5a5d-7z3e-8f00-1234567890ab', null],
  ['hyphens moved', '0190b7e25-a5d-7c3e-8f00-1234567890ab', null],
  ['underscores instead of hyphens', '0190b7e2_5a5d_7c3e_8f00_1234567890ab', null],
  ['empty', '', null],
  ['quote on one side only', `"${V7}`, null],
  ['single quotes', `'${V7}'`, null],
  ['two values joined by a comma (repeated header)', `${V7}, ${V7}`, null],
  ['a duplicated header as a list', [V7, V7], null],
  ['an empty header list', [], null],
  ['non-ASCII lookalike digit', '0190b7e2-5a5d-7c3e-8f00-12345678９0ab', null],
];

describe('UUIDv7 keys (RFC 9562)', () => {
  test.each(cases)('%s', (_, header, expected) => {
    const result = parseIdempotencyKey(header, 'uuidv7', { nowMs: Date.now() });
    if (expected === null) {
      expect(result.ok).toBe(false);
      expect(result.ok === false && result.reason.length).toBeGreaterThan(0);
    } else {
      expect(result).toEqual({ ok: true, key: expected });
    }
  });

  test('at least 40 cases cover every rejection class', () => {
    expect(cases.length).toBeGreaterThanOrEqual(40);
  });

  test('maxFutureSkewMs rejects a key minted far in the future and accepts one within the skew', () => {
    const nowMs = Date.UTC(2026, 0, 1);
    const keyAt = (ms: number) => v7({ msecs: ms });
    const options = { nowMs, maxFutureSkewMs: 60_000 };
    expect(validateUuidV7(keyAt(nowMs + 59_000), options).ok).toBe(true);
    expect(validateUuidV7(keyAt(nowMs - 86_400_000), options).ok).toBe(true);
    expect(validateUuidV7(keyAt(nowMs + 61_000), options)).toEqual({
      ok: false,
      reason: 'UUIDv7 timestamp is too far in the future',
    });
  });
});

describe('token keys', () => {
  test.each([
    ['a Stripe-like key', 'order_2024-01-01:abc', true],
    ['a single character', 'x', true],
    ['255 characters', 'k'.repeat(255), true],
    ['every visible ASCII character but the comma', '!"#$%&\'()*+-./09:;<=>?@AZ[\\]^_`az{|}~', true],
    ['empty', '', false],
    ['256 characters', 'k'.repeat(256), false],
    ['a comma', 'a,b', false],
    ['a space', 'a b', false],
    ['a control character', 'a\u0001b', false],
    ['DEL', 'a\u007fb', false],
    ['non-ASCII', 'caf\u00e9', false],
  ])('%s', (_, key, ok) => {
    expect(validateToken(key).ok).toBe(ok);
    expect(parseIdempotencyKey(key, 'token', { nowMs: 0 }).ok).toBe(ok);
  });

  test('a token is kept exactly as sent', () => {
    expect(validateToken('AbC')).toEqual({ ok: true, key: 'AbC' });
  });
});

describe('custom validators', () => {
  test('receive the raw value and the clock, and decide', () => {
    const seen: unknown[] = [];
    const validator = (raw: string, context: { nowMs: number }) => {
      seen.push([raw, context.nowMs]);
      return raw.startsWith('ord_')
        ? { ok: true as const, key: raw.slice(4) }
        : { ok: false as const, reason: 'no' };
    };
    expect(parseIdempotencyKey('ord_42', validator, { nowMs: 7 })).toEqual({ ok: true, key: '42' });
    expect(parseIdempotencyKey('42', validator, { nowMs: 7 }).ok).toBe(false);
    expect(seen).toEqual([
      ['ord_42', 7],
      ['42', 7],
    ]);
  });

  test('never see a repeated header', () => {
    const validator = () => ({ ok: true as const, key: 'k' });
    expect(parseIdempotencyKey(['a', 'b'], validator, { nowMs: 0 }).ok).toBe(false);
  });
});
