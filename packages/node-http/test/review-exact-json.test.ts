import { describe, expect, test } from 'vitest';
import { exactCanonicalJson } from '../../core/src/exact-json.js';

// Review of the exact JSON reader (module-level string state, insertion sort for small objects): checked
// against JSON.parse + a canonical writer, on random documents with repeated names, escapes, unicode and sizes
// on both sides of the sort switch (24 members).

/** A tiny deterministic PRNG (mulberry32). */
function prng(seed: number) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The canonical form of a parsed value: names sorted by code unit, strings as JSON.stringify writes them. */
function reference(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(reference).join(',')}]`;
  const names = Object.keys(value).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  return `{${names.map((n) => `${JSON.stringify(n)}:${reference((value as Record<string, unknown>)[n])}`).join(',')}}`;
}

const ALPHABET = [
  'a',
  'b',
  'A',
  '_',
  'é',
  '\u00ff',
  '\u4e2d',
  '😀',
  '"',
  '\\',
  '\n',
  '\u0001',
  '/',
  ' ',
  '\u2028',
  'ab',
];

function writeString(random: () => number, value: string): string {
  // The same string, escaped differently each time.
  let out = '"';
  for (const ch of value) {
    const code = ch.codePointAt(0) as number;
    const r = random();
    if (ch === '"' || ch === '\\') out += r < 0.5 ? `\\${ch}` : `\\u${code.toString(16).padStart(4, '0')}`;
    else if (code < 0x20)
      out += r < 0.5 ? JSON.stringify(ch).slice(1, -1) : `\\u${code.toString(16).padStart(4, '0')}`;
    else if (ch === '/' && r < 0.3) out += '\\/';
    else if (code > 0xffff && r < 0.5) {
      const hi = 0xd800 + ((code - 0x10000) >> 10);
      const lo = 0xdc00 + ((code - 0x10000) & 0x3ff);
      out += `\\u${hi.toString(16)}\\u${lo.toString(16).toUpperCase()}`;
    } else if (code <= 0xffff && r < 0.2) out += `\\u${code.toString(16).padStart(4, '0')}`;
    else out += ch;
  }
  return `${out}"`;
}

function randomName(random: () => number, pool: string[]): string {
  if (pool.length > 0 && random() < 0.35) return pool[Math.floor(random() * pool.length)] as string;
  let name = '';
  const length = Math.floor(random() * 3);
  for (let i = 0; i < length; i++) name += ALPHABET[Math.floor(random() * ALPHABET.length)];
  pool.push(name);
  return name;
}

const ws = (random: () => number) => [' ', '', '\n', '\t', '\r\n ', ''][Math.floor(random() * 6)] as string;

function randomValue(random: () => number, depth: number): string {
  const r = random();
  if (depth > 3 || r < 0.3) {
    const s = random();
    if (s < 0.2) return String(Math.floor(random() * 2000) - 1000);
    if (s < 0.3) return ['true', 'false', 'null'][Math.floor(random() * 3)] as string;
    return writeString(random, randomName(random, []));
  }
  if (r < 0.5) {
    const n = Math.floor(random() * 4);
    return `[${ws(random)}${Array.from({ length: n }, () => randomValue(random, depth + 1)).join(`${ws(random)},${ws(random)}`)}${ws(random)}]`;
  }
  const n = depth < 2 && random() < 0.25 ? 20 + Math.floor(random() * 40) : Math.floor(random() * 6);
  const pool: string[] = [];
  const members = Array.from(
    { length: n },
    () =>
      `${writeString(random, randomName(random, pool))}${ws(random)}:${ws(random)}${randomValue(random, depth + 1)}`,
  );
  return `{${ws(random)}${members.join(`${ws(random)},${ws(random)}`)}${ws(random)}}`;
}

describe('exactCanonicalJson against JSON.parse', () => {
  test('random documents with repeated names, escapes, unicode, small and large objects', () => {
    const random = prng(20240601);
    for (let i = 0; i < 1500; i++) {
      const text = `${ws(random)}${randomValue(random, 0)}${ws(random)}`;
      const expected = reference(JSON.parse(text));
      const got = exactCanonicalJson(text);
      if (got !== expected) expect({ text, got }).toEqual({ text, got: expected });
    }
  });

  test('repeated names keep the last value at every level and on both sort paths', () => {
    for (const n of [2, 3, 24, 25, 26, 60]) {
      const names = Array.from({ length: n }, (_, i) => `k${(i * 7) % n}`);
      const inner = `{${names.map((name, i) => `"${name}":${i},"dup":${i}`).join(',')}}`;
      const text = `{"x":${inner},"dup":1,"x":${inner},"dup":2,"a":[${inner}]}`;
      expect(exactCanonicalJson(text)).toBe(reference(JSON.parse(text)));
    }
  });

  test('names equal only after unescaping are one name (the last wins)', () => {
    const text = '{"a":1,"\\u0061":2,"b":{"\\"":1,"\\u0022":2},"\\ud83d\\ude00":1,"😀":3}';
    expect(exactCanonicalJson(text)).toBe(reference(JSON.parse(text)));
  });

  const invalid = [
    '',
    ' ',
    '{',
    '}',
    '{"a":1,}',
    '[1,]',
    '[,1]',
    '{"a" 1}',
    '{"a":}',
    '{a:1}',
    "{'a':1}",
    '01',
    '1.',
    '.5',
    '-',
    '+1',
    '1e',
    '0x10',
    'tru',
    'nul',
    'NaN',
    'Infinity',
    '"\\x"',
    '"\\u12"',
    '"\\u12G4"',
    '"a\nb"',
    '"a\tb"',
    '"unterminated',
    '"a"b"',
    '{"a":1}}',
    '[1]]',
    '{"a":1} x',
    '1 2',
    '{"a":1,"b"}',
    '[1 2]',
    '{"a":1 "b":2}',
    '"\\"',
    '["\\\\\\"]',
  ];
  test.each(invalid)('invalid JSON %j is not canonicalized', (text) => {
    expect(() => JSON.parse(text)).toThrow();
    expect(exactCanonicalJson(text)).toBeUndefined();
  });

  test('no state leaks between calls: a read that fails half-way, then another document', () => {
    const documents = ['{"a":"x\\u0041","b":[1,{"c":"d"}]}', '["\\n",{"\\u00e9":"é"}]', '{"k":"plain"}'];
    const expected = documents.map((text) => reference(JSON.parse(text)));
    for (const broken of invalid) {
      for (const [i, text] of documents.entries()) {
        exactCanonicalJson(broken);
        exactCanonicalJson(`{"${'z'.repeat(i)}\\u0041":1,`); // stopped after an escaped name
        expect(exactCanonicalJson(text)).toBe(expected[i]);
      }
    }
  });

  test('numbers are kept as written (no double rounding)', () => {
    expect(exactCanonicalJson('{"n":12345678901234567890}')).not.toBe(
      exactCanonicalJson('{"n":12345678901234567891}'),
    );
    expect(exactCanonicalJson('[1e400]')).toBe('[1e400]');
    expect(exactCanonicalJson('[1.0]')).not.toBe(exactCanonicalJson('[1]'));
  });

  test('deep nesting: 999 levels canonicalize, 1001 do not (hashed as bytes)', () => {
    expect(exactCanonicalJson(`${'['.repeat(999)}1${']'.repeat(999)}`)).toBe(
      `${'['.repeat(999)}1${']'.repeat(999)}`,
    );
    expect(exactCanonicalJson(`${'['.repeat(1001)}1${']'.repeat(1001)}`)).toBeUndefined();
    expect(exactCanonicalJson(`${'{"a":'.repeat(999)}1${'}'.repeat(999)}`)).toBe(
      `${'{"a":'.repeat(999)}1${'}'.repeat(999)}`,
    );
  });
});
