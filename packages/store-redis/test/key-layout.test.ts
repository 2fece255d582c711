import { randomInt } from 'node:crypto';
import { recordKey } from '@idem/store-redis';
import { describe, expect, test } from 'vitest';
import { escapeKeyPart, globLiteral, parseRecordTag, unescapeKeyPart } from '../src/key-layout.js';

// Code units a hostile scope or key is made of: the escape's own syntax (`%`, `u`, hex digits in both cases), the
// separators and hash-tag braces, glob characters, NUL, multi-byte characters, both halves of a surrogate pair
// (so that lone ones, and pairs that form by chance, occur), and safe characters.
const UNITS = [
  ...'%u0123456789abcdefABCDEF:{}*?[]\\ ._~-zZ\0\n\u00e9\u20ac\uffff',
  '\ud83d',
  '\ude00',
  '\ud800',
  '\udfff',
  '😀',
];

const randomString = () =>
  Array.from({ length: randomInt(0, 24) }, () => UNITS[randomInt(0, UNITS.length)] as string).join('');

describe('key names back to (scope, key)', () => {
  test('every string round-trips through escapeKeyPart and unescapeKeyPart (5,000 random ones)', () => {
    for (let i = 0; i < 5_000; i++) {
      const value = randomString();
      expect(unescapeKeyPart(escapeKeyPart(value))).toBe(value);
    }
  });

  test('every (scope, key) comes back from its record name, whatever the prefix', () => {
    for (let i = 0; i < 2_000; i++) {
      const [scope, key, prefix] = [randomString(), randomString(), randomString().replace(/[{}]/g, '')];
      const name = recordKey(prefix, scope, key);
      expect(name.startsWith(prefix)).toBe(true);
      expect(parseRecordTag(name.slice(prefix.length))).toEqual({ scope, key });
    }
  });

  test('lone surrogates, a pair, % and the escape syntax itself', () => {
    for (const value of [
      '\ud800',
      '\udfff',
      'a\ud83d',
      '\ude00b',
      '😀',
      '\ud83d\ude00',
      '%',
      '%u0041',
      '%41',
      '',
    ]) {
      expect(unescapeKeyPart(escapeKeyPart(value))).toBe(value);
    }
    expect(escapeKeyPart('\ud800')).toBe('%ud800');
    expect(escapeKeyPart('😀')).toBe('%F0%9F%98%80');
  });

  test('a spelling the store never writes is refused: one record, one name', () => {
    for (const escaped of [
      '%41', // an escaped safe character
      '%c3%a9', // lower-case hex
      '%ud83d%ude00', // a pair written as two lone surrogates (the store writes its UTF-8)
      '%u0041', // a %u that is no surrogate
      '%uD800', // upper-case %u
      '%C3', // half a UTF-8 sequence
      '%FF', // no UTF-8 at all
      '%G0',
      '%4',
      '%',
      'a:b',
      'a{',
      'é',
    ]) {
      expect(unescapeKeyPart(escaped)).toBeUndefined();
    }
    for (const tag of ['{a}', 'a:b', '{a:b', 'a:b}', '{a:b}c', '{a:b:c}', '{a:b}}', '{%41:b}', '']) {
      expect(parseRecordTag(tag)).toBeUndefined();
    }
    expect(parseRecordTag('{:}')).toEqual({ scope: '', key: '' });
  });
});

describe('glob literals for SCAN MATCH', () => {
  test('*, ?, [, ] and \\ are escaped byte by byte; everything else is kept', () => {
    expect(globLiteral(Buffer.from('a*b?c[d]e\\f:{é')).toString()).toBe('a\\*b\\?c\\[d\\]e\\\\f:{é');
    expect(globLiteral(Buffer.from([0xff, 0x2a]))).toEqual(Buffer.from([0xff, 0x5c, 0x2a]));
  });
});
