// The fingerprint of raw JSON bodies, read from their bytes, against the fingerprint as it was before
// (test/support/oracle-fingerprint.ts, a copy of the code the byte reader replaced): thousands of random
// documents and broken texts from a fixed seed, each as a Buffer, a Uint8Array in the middle of a larger
// buffer and a string, with fields excluded and without. Every one must give the same fingerprint.
import { computeFingerprint, type FingerprintInput } from '@idem/core';
import { describe, expect, test } from 'vitest';
import { exactCanonicalJson } from '../src/exact-json.js';
import { exactCanonicalJsonBytes, NEEDS_TEXT, NOT_JSON } from '../src/exact-json-bytes.js';
import { computeFingerprint as oracle } from './support/oracle-fingerprint.js';

/** mulberry32: a small seeded generator, so that a failure reproduces. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const rnd = random(0x1de3);
const int = (n: number): number => Math.floor(rnd() * n);
const pick = <T>(items: readonly T[]): T => items[int(items.length)] as T;
const chance = (p: number): boolean => rnd() < p;

// Names that sort differently by UTF-16 code unit and by UTF-8 byte (an astral character against U+E000 and
// U+FFFF), that are prefixes of one another with a byte below the quote after them (`a` and `a!`, `a b`),
// `__proto__`, dotted ones, and few enough that members repeat.
const NAMES = [
  'a',
  'b',
  'A',
  'ab',
  'a b',
  'a!',
  'a\u0000',
  '',
  '__proto__',
  'constructor',
  'a.b',
  'é',
  'e\u0301',
  '\u00ff',
  '\u0100',
  '\u07ff',
  '\u0800',
  '\ud7ff',
  '\ue000',
  '\uf8ff',
  '\uffff',
  '\u{10000}',
  '\u{1f600}',
  '\u{10ffff}',
  'z',
  'lines',
  'sku',
];
const EXCLUDED = ['a', 'b.a', 'a.b', '__proto__', 'é', 'ab.a', 'a.a.a', '\u{1f600}', 'lines.sku', 'z'];
const STRING_CHARS = [
  'a',
  'Z',
  ' ',
  '"',
  '\\',
  '/',
  '\b',
  '\f',
  '\n',
  '\r',
  '\t',
  '\u0000',
  '\u001f',
  '\u007f',
  '\u0080',
  'é',
  '\u2028',
  '\u2029',
  '\ue000',
  '\uffff',
  '\ufeff',
  '\u{1f600}',
  '\u{10ffff}',
  '\ud800', // lone surrogates: only ever written escaped
  '\udbff',
  '\udc00',
  '\udfff',
];
const NUMBERS = [
  '0',
  '-0',
  '1',
  '-1',
  '1.0',
  '1.50',
  '0.1',
  '1e400',
  '-1e400',
  '1E+2',
  '1e-2',
  '1e02',
  '2.5E-0',
  '12345678901234567890',
  '12345678901234567891',
  '-0.0e0',
  '9007199254740993',
];
const SPACES = [' ', '\n', '\t', '\r', ' \r\n\t '];

const space = (): string => (chance(0.15) ? pick(SPACES) : '');

const hex4 = (unit: number): string => {
  const digits = unit.toString(16).padStart(4, '0');
  return chance(0.5) ? digits : digits.toUpperCase();
};

/** A string token denoting `value`, each character written raw or escaped at random. */
function stringToken(value: string, escapes = true): string {
  let text = '"';
  for (const char of value) {
    const unit = char.charCodeAt(0);
    const lone = char.length === 1 && unit >= 0xd800 && unit <= 0xdfff;
    const mustEscape = unit < 0x20 || char === '"' || char === '\\' || lone;
    if (!escapes && !mustEscape) {
      text += char;
      continue;
    }
    if (!mustEscape && chance(0.7)) {
      text += char;
    } else if (char.length === 2) {
      text += `\\u${hex4(unit)}\\u${hex4(char.charCodeAt(1))}`;
    } else {
      const short = {
        '"': '\\"',
        '\\': '\\\\',
        '/': '\\/',
        '\b': '\\b',
        '\f': '\\f',
        '\n': '\\n',
        '\r': '\\r',
        '\t': '\\t',
      }[char];
      text += short !== undefined && chance(0.6) ? short : `\\u${hex4(unit)}`;
    }
  }
  return `${text}"`;
}

function randomString(): string {
  let value = '';
  const length = int(6);
  for (let k = 0; k < length; k++) value += pick(STRING_CHARS);
  return value;
}

/** A random JSON text, with random member order, duplicates, whitespace and spellings. */
function document(depth: number): string {
  const kind = depth > 5 ? int(4) : int(7);
  switch (kind) {
    case 0:
      return pick(NUMBERS);
    case 1:
      return stringToken(randomString());
    case 2:
      return pick(['true', 'false', 'null']);
    case 3:
      return chance(0.5) ? `-${int(1000)}` : `${int(100000)}.${int(100)}e${int(5)}`;
    case 4:
    case 5: {
      const count = int(6);
      const members: string[] = [];
      for (let m = 0; m < count; m++) {
        // Mostly names as written (the byte reader's own path), some with escapes (left to the string one).
        const name = stringToken(pick(NAMES), chance(0.15));
        members.push(`${space()}${name}${space()}:${space()}${document(depth + 1)}${space()}`);
      }
      return count === 0 ? `{${space()}}` : `{${members.join(',')}}`;
    }
    default: {
      const count = int(5);
      const items: string[] = [];
      for (let m = 0; m < count; m++) items.push(`${space()}${document(depth + 1)}${space()}`);
      return count === 0 ? `[${space()}]` : `[${items.join(',')}]`;
    }
  }
}

/** Containers nested `depth` deep around a small document, objects and arrays mixed. */
function deep(depth: number): string {
  let open = '';
  let close = '';
  for (let d = 0; d < depth; d++) {
    if (chance(0.5)) {
      const sibling = chance(0.5) ? `"b":${pick(NUMBERS)},` : '';
      open += `{${sibling}"${pick(['a', 'z', '__proto__'])}":`;
      close = `}${close}`;
    } else {
      open += '[';
      close = `${chance(0.3) ? ',1' : ''}]${close}`;
    }
  }
  return `${open}${document(5)}${close}`;
}

const encoder = new TextEncoder();

/** Broken texts: valid documents cut, extended, or with bytes no JSON text (or no UTF-8) holds. */
function broken(text: string): Uint8Array {
  const bytes = encoder.encode(text);
  const at = int(bytes.length + 1);
  const splice = (insert: number[]): Uint8Array =>
    Uint8Array.from([...bytes.subarray(0, at), ...insert, ...bytes.subarray(at)]);
  switch (int(12)) {
    case 0:
      return bytes.subarray(0, at); // truncated
    case 1:
      return encoder.encode(`${text}${pick([' x', ',', '1', '}', ']', '{}', '"'])}`); // trailing garbage
    case 2:
      return splice([int(0x20)]); // a raw control character
    case 3:
      return splice([0x80 + int(0x80)]); // a lone byte >= 0x80
    case 4:
      return splice(
        pick([
          [0xc0, 0xaf],
          [0xc1, 0xbf],
          [0xe0, 0x80, 0xaf],
          [0xf0, 0x80, 0x80, 0xaf],
        ]),
      ); // overlong
    case 5:
      return splice(
        pick([
          [0xed, 0xa0, 0x80],
          [0xed, 0xbf, 0xbf],
        ]),
      ); // a UTF-16 surrogate as UTF-8
    case 6:
      return splice(pick([[0xf4, 0x90, 0x80, 0x80], [0xf5, 0x80, 0x80, 0x80], [0xff], [0xe2, 0x82]]));
    case 7:
      return Uint8Array.from([0xef, 0xbb, 0xbf, ...bytes]); // a byte order mark
    case 8: {
      const copy = Uint8Array.from(bytes);
      if (copy.length > 0) copy[int(copy.length)] = int(256); // one byte changed
      return copy;
    }
    case 9:
      return encoder.encode(text.replace(/\\u([0-9a-fA-F]{2})/, '\\u$1')); // a short \u escape
    case 10:
      return encoder.encode(
        pick(['', ' ', '-', '1.', '.5', '01', '1e', '1e+', '+1', 'tru', 'nul', 'True', '"\\x"']),
      );
    default:
      return splice([pick([0x22, 0x5c, 0x2c, 0x3a, 0x7b, 0x5b, 0x7d, 0x5d])]); // stray punctuation
  }
}

const CONTENT_TYPES = ['application/json', 'application/json; charset=utf-8', 'application/vnd.api+json'];

/** The body as the adapters may hand it: a Buffer, a view into the middle of a larger buffer, a string. */
function bodies(bytes: Uint8Array): unknown[] {
  const larger = new Uint8Array(bytes.length + 11);
  larger.fill(0x7b);
  larger.set(bytes, 5);
  const view = larger.subarray(5, 5 + bytes.length);
  return [Buffer.from(bytes), view, Buffer.from(bytes).toString('utf8')];
}

function compare(bytes: Uint8Array, label: string): void {
  const excludeFields = [pick(EXCLUDED), pick(EXCLUDED)];
  const kinds = ['a Buffer', 'a view', 'a string'];
  for (const [index, body] of bodies(bytes).entries()) {
    for (const options of [undefined, { excludeFields }]) {
      const input: FingerprintInput = {
        method: 'POST',
        route: '/orders',
        path: '/orders',
        body,
        contentType: pick(CONTENT_TYPES),
      };
      const got = computeFingerprint(input, options);
      const want = oracle(input, options);
      if (got !== want) {
        throw new Error(
          `${label}: fingerprints differ for ${kinds[index]} ` +
            `${JSON.stringify(Buffer.from(bytes).toString('latin1'))} (${JSON.stringify(options)})`,
        );
      }
    }
  }
}

/** The canonical bytes themselves against the string reader's text, for a clear message on a difference. */
const outcomes = { canonical: 0, notJson: 0, needsText: 0 };

function compareCanonical(text: string, excluded?: ReadonlySet<string>): void {
  const src = encoder.encode(text);
  const out = new Uint8Array(src.length + 8);
  const end = exactCanonicalJsonBytes(src, src.length, out, 3, excluded);
  const want = exactCanonicalJson(text, excluded);
  if (end === NEEDS_TEXT) {
    outcomes.needsText++;
    return;
  }
  if (end === NOT_JSON) {
    outcomes.notJson++;
    expect(want, text).toBeUndefined();
    return;
  }
  outcomes.canonical++;
  expect(Buffer.from(out.subarray(3, end)).toString('utf8'), text).toBe(want);
  expect(Buffer.from(out.subarray(3, end)).equals(Buffer.from(want as string)), text).toBe(true);
}

describe('raw JSON bodies read from their bytes fingerprint as the string reader did', () => {
  test('random documents: member order, duplicates, escapes, numbers, whitespace', () => {
    for (let n = 0; n < 3_000; n++) {
      const text = `${space()}${document(0)}${space()}`;
      compareCanonical(text);
      compareCanonical(text, new Set([pick(EXCLUDED), pick(EXCLUDED)]));
      compare(encoder.encode(text), `document ${n}`);
    }
    // Most take the byte reader's own path, not the string reader's.
    expect(outcomes.canonical).toBeGreaterThan(outcomes.needsText);
    expect(outcomes.notJson).toBe(0);
  });

  test('broken texts: truncated, trailing garbage, control characters, invalid UTF-8, a BOM', () => {
    for (let n = 0; n < 3_000; n++) {
      const bytes = broken(document(0));
      compare(bytes, `broken ${n}`);
    }
  });

  test('nesting near and past the depth limit', () => {
    for (const depth of [998, 999, 1_000, 1_001, 1_002, 1_500]) {
      for (let n = 0; n < 6; n++) {
        const text = deep(depth);
        compareCanonical(text);
        compare(encoder.encode(text), `depth ${depth}`);
      }
    }
    // Exactly at the limit, by kind: 1000 containers are read, 1001 are not.
    for (const [open, close] of [
      ['[', ']'],
      ['{"a":', '}'],
    ] as const) {
      for (const depth of [1_000, 1_001]) {
        compare(encoder.encode(`${open.repeat(depth)}1${close.repeat(depth)}`), `${open} x ${depth}`);
        compare(encoder.encode(`${open.repeat(depth)}[]${close.repeat(depth)}`), `${open} x ${depth} + []`);
      }
    }
  });

  test('a large document, and objects with many members (sorted another way)', () => {
    for (let n = 0; n < 20; n++) {
      const members = Array.from(
        { length: 20 + int(200) },
        () => `${stringToken(pick(NAMES) + int(40), false)}:${document(3)}`,
      );
      const text = `{${members.join(',')}}`;
      compareCanonical(text);
      compare(encoder.encode(text), `many members ${n}`);
    }
    const large = `[${Array.from({ length: 300 }, () => document(1)).join(',')}]`;
    compareCanonical(large);
    compare(encoder.encode(large), 'large');
  });

  test('strings that are not well-formed UTF-16, and other request parts', () => {
    const input = (body: unknown, more: Partial<FingerprintInput> = {}): FingerprintInput => ({
      method: 'POST',
      route: '/orders',
      path: '/orders',
      body,
      contentType: 'application/json',
      ...more,
    });
    const cases: FingerprintInput[] = [
      input('"\ud800"'),
      input('{"a":"\udc00"}'),
      input('{"\ud800":1}'),
      input('{"b":1,"a":2}', { method: 'post' }),
      input('{"b":1,"a":2}', { method: 'stra\u00dfe' }),
      input('{"b":1,"a":2}', { route: '/caf\u00e9', path: '/caf\u00e9/"1"' }),
      input('{"b":1,"a":2}', { route: '/a\\b', path: undefined }),
      input('{"b":1,"a":2}', { path: null as unknown as string }),
      input('{"b":1,"a":2}', { query: 'a=1&b&=&a=2' }),
      input('{"b":1,"a":2}', { query: '?x=%61' }),
      input('{"b":1,"a":2}', { query: new URLSearchParams('a=1&b=2') }),
      input('{"b":1,"a":2}', { query: { b: ['1', { c: 2 }], a: '1' } }),
      input('{"b":1,"a":2}', { contentType: 'Application/JSON ; Charset="UTF-8"; q=1' }),
      input('{"b":1,"a":2}', { contentType: ' application/json' }),
      input('{"b":1,"a":2}', { contentType: 'text/plain' }),
      input(Buffer.from('{"b":1,"a":2}'), { contentType: 'application/json\u00e9' }),
      input(new Uint16Array([0x7b7b, 0x7d7d])),
      input(new DataView(Buffer.from('[1, 2]').buffer.slice(0) as ArrayBuffer)),
      input(Buffer.from('[1, 2]').buffer.slice(0)),
      input(new SharedArrayBuffer(4)),
      input(new Uint8Array(new SharedArrayBuffer(4)).fill(0x31)),
      input({ b: 1, a: [2, { d: 1, c: 2 }] }),
      input({ b: 1, a: 2 }, { contentType: undefined }),
      input(undefined),
      input(''),
      input(Buffer.alloc(0)),
    ];
    for (const c of cases) {
      for (const options of [undefined, { excludeFields: ['a', 'a.c'] }]) {
        expect(computeFingerprint(c, options)).toBe(oracle(c, options));
      }
    }
  });

  test('buffers the same bytes share: a scratch buffer reused across calls leaves nothing behind', () => {
    const large = Buffer.from(`{"z":"${'x'.repeat(100_000)}","a":[${'1,'.repeat(5_000)}2]}`);
    const small = Buffer.from('{"b":1,"a":2}');
    const first = computeFingerprint(input(small));
    computeFingerprint(input(large));
    computeFingerprint(input(JSON.stringify({ b: 'é'.repeat(50_000) })));
    expect(computeFingerprint(input(small))).toBe(first);
    expect(computeFingerprint(input(large))).toBe(oracle(input(large)));
    function input(body: unknown): FingerprintInput {
      return { method: 'POST', route: '/orders', path: '/orders', body, contentType: 'application/json' };
    }
  });
});
