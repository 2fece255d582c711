import { describe, expect, test } from 'vitest';
import {
  exactNumber,
  JsonTextError,
  parseLosslessJson,
  stringifyLosslessJson,
} from '../src/catalog/lossless-json.js';

const parse = (text: string) => parseLosslessJson(text, { maxDepth: 64 });

describe('a number is the value its text denotes', () => {
  test.each([
    ['0', 0],
    ['-0 (one zero: -0 is 0)', 0],
    ['7', 7],
    ['1.0', 1],
    ['70e-1', 7],
    ['-1', -1],
    ['9007199254740991 (2^53 - 1)', 9007199254740991],
    ['9007199254740992 (2^53)', 9007199254740992n],
    ['-9007199254740993', -9007199254740993n],
    ['5938174936372637279', 5938174936372637279n],
    ['5938174936372637279e0', 5938174936372637279n],
    ['59381749363726372790e-1', 5938174936372637279n],
    ['5.938174936372637279E18', 5938174936372637279n],
    ['1e18', 10n ** 18n],
    ['9223372036854775808 (past int64: still exact)', 9223372036854775808n],
    ['1.5', 1.5],
    ['0.1', 0.1],
    ['-2.5e-3', -0.0025],
    ['1e-400 (a double underflows, as JSON.parse makes it)', 0],
  ])('%s', (text, value) => {
    const parsed = exactNumber(text.split(' ')[0] as string);
    expect(parsed).toBe(value);
    if (value === 0) expect(Object.is(parsed, -0)).toBe(false);
  });

  test('one representation per value: a safe integer is always a number, any other integer a bigint', () => {
    expect(typeof exactNumber('9007199254740991')).toBe('number');
    expect(typeof exactNumber('9007199254740991.0')).toBe('number');
    expect(typeof exactNumber('9007199254740992')).toBe('bigint');
    expect(typeof exactNumber('9.007199254740992e15')).toBe('bigint');
  });

  test('beyond a double has no value (1e400, a 400-digit integer)', () => {
    expect(exactNumber('1e400')).toBeUndefined();
    expect(exactNumber('-1e400')).toBeUndefined();
    expect(exactNumber(`1${'0'.repeat(399)}`)).toBeUndefined();
    expect(exactNumber(`1${'0'.repeat(300)}`)).toBe(10n ** 300n);
  });

  test('hostile tokens take linear time: long runs of zeros, huge exponents', () => {
    const started = performance.now();
    expect(exactNumber(`1${'0'.repeat(500_000)}1e-500000`)).toBe(10);
    expect(exactNumber(`0.${'0'.repeat(500_000)}1`)).toBe(0);
    expect(exactNumber('1e99999999999999999999')).toBeUndefined();
    expect(exactNumber('1e-99999999999999999999')).toBe(0);
    expect(performance.now() - started).toBeLessThan(1_000);
  });
});

describe('parsing', () => {
  test('objects as JSON.parse builds them: own __proto__ key, the last duplicate wins, bigints inside', () => {
    const value = parse('{"__proto__":{"x":1},"a":1,"b":[5938174936372637279],"a":2}') as Record<
      string,
      unknown
    >;
    expect(Object.getPrototypeOf(value)).toBe(Object.prototype);
    expect(Object.keys(value)).toEqual(['__proto__', 'a', 'b']);
    expect(value.a).toBe(2);
    expect(value.b).toEqual([5938174936372637279n]);
  });

  test('nesting deeper than the limit is refused before the recursive parser sees it', () => {
    expect(parse(`${'['.repeat(64)}${']'.repeat(64)}`)).toBeDefined();
    const deep = `${'['.repeat(1_000_000)}${']'.repeat(1_000_000)}`;
    expect(() => parse(deep)).toThrow(expect.objectContaining({ problem: 'depth' }));
    // Brackets inside strings are text, escaped quotes included.
    expect(parse(`{"a":"${'['.repeat(100)}\\"${'{'.repeat(100)}"}`)).toBeDefined();
  });

  test('errors never quote the text', () => {
    for (const text of [
      '{"secret": tru}',
      '{"secret":1,}',
      '"secret',
      '01',
      '-',
      '1.',
      '.5',
      '+1',
      '[1 2]',
    ]) {
      let error: unknown;
      try {
        parse(text);
      } catch (e) {
        error = e;
      }
      expect(error, text).toBeInstanceOf(JsonTextError);
      expect((error as JsonTextError).problem).toBe('syntax');
      expect((error as Error).message).not.toContain('secret');
    }
  });

  test('a number beyond a double fails the parse, unless the caller marks where it is', () => {
    expect(() => parse('{"a":1e400}')).toThrow(expect.objectContaining({ problem: 'range' }));
    const marker = Symbol('here');
    expect(parseLosslessJson('{"a":[1e400]}', { maxDepth: 8, beyondRange: () => marker })).toEqual({
      a: [marker],
    });
  });
});

describe('writing', () => {
  test('bigints as their digits, never strings; the text of a Java metadata document round-trips', () => {
    expect(stringifyLosslessJson({ a: 5938174936372637279n, b: -(2n ** 63n), c: 1.5, d: 'x' })).toBe(
      '{"a":5938174936372637279,"b":-9223372036854775808,"c":1.5,"d":"x"}',
    );
    const text =
      '{"current-snapshot-id":5938174936372637279,"refs":{"main":{"snapshot-id":9223372036854775807,"type":"branch"}},"snapshots":[{"snapshot-id":-9223372036854775808,"timestamp-ms":1700000000000}],"s":"é\\"","f":0.1}';
    expect(stringifyLosslessJson(parse(text))).toBe(text);
  });
});
