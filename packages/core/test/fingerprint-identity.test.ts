import { randomInt } from 'node:crypto';
import { PassThrough } from 'node:stream';
import { canonicalJson, computeFingerprint, UNSEEN_BODY } from '@idem/core';
import { describe, expect, test } from 'vitest';

// Equal fingerprints MUST mean equal requests. Every pair below is two different requests that an earlier
// fingerprint (or a naive one) confused; each must hash apart, through every form an adapter can hand over.

const json = 'application/json';
const post = (body: string, extra: object = {}) =>
  computeFingerprint({ method: 'POST', route: '/orders/:id', body, contentType: json, ...extra });
const asBytes = (body: string) =>
  computeFingerprint({ method: 'POST', route: '/orders/:id', body: Buffer.from(body), contentType: json });

describe('request identity: different requests never share a fingerprint', () => {
  test.each([
    ['path parameters', { path: '/orders/1' }, { path: '/orders/2' }],
    ['path encoding', { path: '/ns/a%1Fb' }, { path: '/ns/a%1Fc' }],
    ['a path against none', { path: '/orders/1' }, {}],
    ['nested query against a JSON-looking value', { query: 'a[b]=1' }, { query: 'a={"b":"1"}' }],
    ['query pairs split differently', { query: 'a=1&b=2' }, { query: 'a=1%26b=2' }],
    ['the order of one name’s values', { query: 'a=1&a=2' }, { query: 'a=2&a=1' }],
    ['names that decode alike, reordered', { query: 'a=1&%61=2' }, { query: '%61=2&a=1' }],
    ['+ and %20 in names, reordered', { query: 'x+y=1&x%20y=2' }, { query: 'x%20y=2&x+y=1' }],
    ['qs array syntax, reordered', { query: 'a[]=1&a=2' }, { query: 'a=2&a[]=1' }],
    [
      'the media type',
      { body: 'a=1', contentType: 'application/x-www-form-urlencoded' },
      { body: 'a=1', contentType: 'text/plain' },
    ],
    [
      'JSON against a +json type',
      { body: '{"a":1}', contentType: 'application/json' },
      { body: '{"a":1}', contentType: 'application/merge-patch+json' },
    ],
    ['a name without a value against an empty value', { query: 'a' }, { query: 'a=' }],
    [
      'a parsed nested query against a string that looks alike',
      { query: { a: { b: '1' } } },
      { query: { a: '{"b":"1"}' } },
    ],
  ])('%s', (_, a, b) => {
    const base = { method: 'DELETE', route: '/orders/:id' };
    expect(computeFingerprint({ ...base, ...a })).not.toBe(computeFingerprint({ ...base, ...b }));
  });

  test.each([
    ['a huge exponent against null', '{"n":1e400}', '{"n":null}'],
    ['two huge exponents', '{"n":1e400}', '{"n":1e401}'],
    ['integers beyond 2^53', '{"id":12345678901234567890}', '{"id":12345678901234567891}'],
    ['decimals beyond double precision', '{"x":0.10000000000000000001}', '{"x":0.1}'],
    ['negative zero', '[-0]', '[0]'],
    ['__proto__ is an ordinary member', '{"__proto__":1,"x":{"y":2}}', '{"x":{"y":2}}'],
    ['__proto__ holding an object', '{"__proto__":{"x":1},"y":2}', '{"__proto__":{"x":2},"y":2}'],
    ['__proto__ against a member of that object', '{"__proto__":{"y":2},"x":1}', '{"x":1,"y":2}'],
    ['a string with an escaped quote', '{"a":"x\\\\","b":"y"}', '{"a":"x\\\\\\",\\"b\\":\\"y"}'],
    ['a repeated name: the last one counts', '{"a":1,"a":2}', '{"a":1}'],
  ])('%s', (_, a, b) => {
    expect(post(a)).not.toBe(post(b));
    expect(asBytes(a)).not.toBe(asBytes(b));
  });

  test('a body the adapter could not read is refused, never hashed as no body', () => {
    expect(() => computeFingerprint({ method: 'PUT', route: '/files/:id', body: UNSEEN_BODY })).toThrow(
      /a body the fingerprint cannot see/,
    );
  });

  test('the spelling of the content type does not change the identity; its parameters do', () => {
    const of = (contentType: string) => post('{"a":1}', { contentType });
    expect(of('Application/JSON; Charset=UTF-8')).toBe(of('application/json;charset="utf-8"'));
    expect(of('application/json; a=1; b=2')).toBe(of('application/json;b=2;a=1'));
    expect(of('application/json; x="a;b"')).not.toBe(of('application/json; x=a'));
    expect(of('application/json; x="a\\"b"')).toBe(of('application/json; x=a"b'));
    // JSON is UTF-8 whatever it says (RFC 8259 §11): its charset is no part of the request.
    expect(of('application/json; charset=utf-8')).toBe(of('application/json'));
    const text = (contentType: string) => post('abc', { contentType });
    expect(text('text/plain; charset=utf-8')).not.toBe(text('text/plain; charset=iso-8859-1'));
    expect(text('text/plain; charset=utf-8')).not.toBe(text('text/plain'));
  });

  test('the same JSON written differently is one identity: key order, whitespace, string escapes', () => {
    const reference = post('{"a":1,"b":{"c":[1,2],"d":"xé"}}');
    expect(post(' { "b" : { "d" : "x\\u00e9", "c" : [ 1 , 2 ] } ,\n\t"a" : 1 } ')).toBe(reference);
    expect(asBytes('{"b":{"c":[1,2],"d":"xé"},"a":1}')).toBe(reference);
    // A repeated name reads as JSON.parse reads it: the last value.
    expect(post('{"a":0,"a":1,"b":{"c":[1,2],"d":"xé"}}')).toBe(reference);
  });

  test('a raw JSON body and the parsed value agree where numbers are written as JavaScript writes them', () => {
    const text = '{"z":[1,-2.5,1e+21,"s",true,null,{}],"a":{"k":[]}}';
    expect(post(text)).toBe(
      computeFingerprint({ method: 'POST', route: '/orders/:id', body: JSON.parse(text), contentType: json }),
    );
  });

  test('excludeFields applies to raw JSON exactly as to parsed values, __proto__ included', () => {
    const options = { excludeFields: ['meta.trace', 'items.nonce', '__proto__.x'] };
    const raw = (body: string) =>
      computeFingerprint({ method: 'POST', route: '/r', body, contentType: json }, options);
    const parsed = (body: string) =>
      computeFingerprint({ method: 'POST', route: '/r', body: JSON.parse(body), contentType: json }, options);
    const a = '{"meta":{"trace":1,"v":1},"items":[{"nonce":1,"id":1}],"__proto__":{"x":1,"y":1}}';
    const b = '{"meta":{"trace":2,"v":1},"items":[{"nonce":2,"id":1}],"__proto__":{"x":2,"y":1}}';
    const c = '{"meta":{"trace":2,"v":1},"items":[{"nonce":2,"id":1}],"__proto__":{"x":2,"y":2}}';
    for (const fingerprint of [raw, parsed]) {
      expect(fingerprint(b)).toBe(fingerprint(a));
      expect(fingerprint(c)).not.toBe(fingerprint(a));
    }
    expect(raw(a)).toBe(parsed(a));
  });

  test('bytes that are not well-formed UTF-8 are hashed as bytes, never decoded alike', () => {
    const bad = (byte: number) =>
      computeFingerprint({
        method: 'POST',
        route: '/r',
        body: Buffer.concat([Buffer.from('{"a":"'), Buffer.from([byte]), Buffer.from('"}')]),
        contentType: json,
      });
    expect(bad(0xff)).not.toBe(bad(0xfe));
    const lone = (text: string) =>
      computeFingerprint({ method: 'POST', route: '/r', body: text, contentType: json });
    expect(lone('{"a":"\ud800"}')).not.toBe(lone('{"a":"\udbff"}'));
  });

  test('invalid JSON with a JSON content type is hashed as bytes: control characters, bad escapes, trailing text', () => {
    for (const text of [
      '{"a":"\t"}',
      '{"a":"\\x"}',
      '{"a":1}x',
      '{"a":01}',
      '{"a":1,}',
      '[1,]',
      '{a:1}',
      '"\\ud800',
    ]) {
      // As bytes, a trailing space is another body; as canonical JSON it would be the same one.
      expect(post(text), JSON.stringify(text)).not.toBe(post(`${text} `));
    }
    expect(post('{"a":1}')).toBe(post('{"a":1} '));
    // A valid document and the same bytes with a control character inside a string never meet.
    expect(post('{"a":"\\t"}')).not.toBe(post('{"a":"\t"}'));
  });

  test('deep nesting neither overflows the stack nor collides: parsed values and raw text', () => {
    const depth = 200_000;
    const deepText = `${'['.repeat(depth)}1${']'.repeat(depth)}`;
    const deepValue = JSON.parse(deepText) as unknown;
    expect(post(deepText)).toMatch(/^[0-9a-f]{64}$/);
    expect(post(deepText)).not.toBe(post(`${'['.repeat(depth)}2${']'.repeat(depth)}`));
    const viaValue = computeFingerprint({ method: 'POST', route: '/r', body: deepValue });
    expect(viaValue).toMatch(/^[0-9a-f]{64}$/);
    const objects = JSON.parse(`${'{"a":'.repeat(50_000)}1${'}'.repeat(50_000)}`) as unknown;
    expect(canonicalJson(objects).length).toBe(50_000 * 6 + 1);
  });

  test('fuzz: the raw canonical form agrees with JSON.parse on validity, and with the parsed form on value', () => {
    let compared = 0;
    for (let round = 0; round < 3_000; round++) {
      // A container at the top: a string or null handed over as a value means raw text or no body.
      const doc = randomInt(2) === 0 ? [randomDocument(3)] : { k: randomDocument(3) };
      const text = JSON.stringify(doc, null, randomInt(3) === 0 ? 1 : undefined);
      expect(post(text)).toBe(
        computeFingerprint({ method: 'POST', route: '/orders/:id', body: doc, contentType: json }),
      );
      // Break the text at one place: validity must agree with JSON.parse.
      const at = randomInt(text.length + 1);
      const broken =
        text.slice(0, at) + ['"', '\\', ',', '}', ']', '\u0001', 'x', ' '][randomInt(8)] + text.slice(at);
      // Text that is not well-formed (a surrogate pair cut in two) is hashed as it is, never decoded.
      let valid = broken.isWellFormed();
      try {
        JSON.parse(broken);
      } catch {
        valid = false;
      }
      // Whitespace at the end is insignificant to JSON, and significant to bytes.
      if (valid) expect(post(broken)).toBe(post(`${broken} `));
      else expect(post(broken)).not.toBe(post(`${broken} `));
      compared++;
    }
    expect(compared).toBe(3_000);
  });
});

function randomDocument(depth: number): unknown {
  const kind = randomInt(depth <= 0 ? 4 : 6);
  switch (kind) {
    case 0:
      return [null, true, false][randomInt(3)];
    case 1:
      return [0, -1, 1.5, 1e21, -3e-7, 123456, 2 ** 53 - 1][randomInt(7)];
    case 2:
      return ['', 'a', 'é', '"q"', '\\', '\n', '__proto__', '\u2028', '😀'][randomInt(9)];
    case 3:
      return randomInt(1_000_000).toString(36);
    case 4:
      return Array.from({ length: randomInt(4) }, () => randomDocument(depth - 1));
    default: {
      const object: Record<string, unknown> = {};
      for (let i = randomInt(5); i > 0; i--) {
        Object.defineProperty(
          object,
          ['a', 'b', 'é', '__proto__', 'constructor', '', 'z1'][randomInt(7)] as string,
          {
            value: randomDocument(depth - 1),
            enumerable: true,
            writable: true,
            configurable: true,
          },
        );
      }
      return object;
    }
  }
}

/** The bytes of a body kind, as a host hands it over. */
const kinds: ReadonlyArray<readonly [string, (bytes: Uint8Array) => unknown]> = [
  ['a string', (bytes) => Buffer.from(bytes).toString('latin1')],
  ['a Uint8Array', (bytes) => new Uint8Array(bytes)],
  ['a Buffer', (bytes) => Buffer.from(bytes)],
  ['an ArrayBuffer', (bytes) => new Uint8Array(bytes).buffer],
  [
    'a SharedArrayBuffer',
    (bytes) => {
      const shared = new SharedArrayBuffer(bytes.byteLength);
      new Uint8Array(shared).set(bytes);
      return shared;
    },
  ],
  ['a DataView', (bytes) => new DataView(new Uint8Array(bytes).buffer)],
  ['a Uint16Array', (bytes) => new Uint16Array(new Uint8Array(bytes).buffer)],
  ['a Float64Array', (bytes) => new Float64Array(new Uint8Array(bytes).buffer)],
  [
    'a view into a larger buffer',
    (bytes) => {
      const larger = new Uint8Array(bytes.byteLength + 16).fill(0x55);
      larger.set(bytes, 8);
      return new Int8Array(larger.buffer, 8, bytes.byteLength);
    },
  ],
];

describe('body kinds × media types: a binary body is hashed by its bytes, whatever view holds them', () => {
  const of = (body: unknown, contentType: string) =>
    computeFingerprint({ method: 'POST', route: '/up', path: '/up', body, contentType });
  // Eight bytes, so that every view (Float64Array included) covers them whole.
  const bytesA = Uint8Array.from([1, 0, 2, 0, 3, 0, 4, 0]);
  const bytesB = Uint8Array.from([1, 0, 2, 0, 3, 0, 4, 1]);
  const mediaTypes = [
    'application/octet-stream',
    'multipart/form-data; boundary=A',
    'multipart/form-data; boundary=B',
    'text/plain; charset=utf-8',
    'text/plain; charset=iso-8859-1',
    'application/json',
  ];

  test.each(kinds)('%s: the same bytes as every other kind, and other bytes apart', (_, make) => {
    for (const type of mediaTypes) {
      expect(of(make(bytesA), type)).toBe(of(bytesA, type));
      expect(of(make(bytesB), type)).toBe(of(bytesB, type));
      expect(of(make(bytesA), type)).not.toBe(of(make(bytesB), type));
    }
  });

  test('every (bytes, media type) pair is distinct from every other, and from parsed JSON that looks alike', () => {
    const seen = new Map<string, string>();
    const add = (name: string, fingerprint: string) => {
      expect(seen.get(fingerprint), `${name} collides`).toBeUndefined();
      seen.set(fingerprint, name);
    };
    for (const type of mediaTypes) {
      add(`A as ${type}`, of(new Uint16Array(bytesA.buffer), type));
      add(`B as ${type}`, of(new DataView(bytesB.buffer), type));
      // What JSON.stringify makes of those views, and of every ArrayBuffer, Blob or DataView: {}.
      add(`parsed {"0":1,"1":2,…} as ${type}`, of({ 0: 1, 1: 2, 2: 3, 3: 4 }, type));
      add(`parsed {} as ${type}`, of({}, type));
    }
    expect(seen.size).toBe(mediaTypes.length * 4);
  });

  test('an empty binary body is no body, as an empty string is', () => {
    const none = of(undefined, 'application/octet-stream');
    for (const [, make] of kinds) expect(of(make(new Uint8Array(0)), 'application/octet-stream')).toBe(none);
  });

  test('JSON bytes in any view are canonicalized as JSON', () => {
    const text = new TextEncoder().encode('{"b":1,"a":2}');
    const reordered = new TextEncoder().encode('{ "a":2, "b":1 }');
    expect(of(new DataView(text.buffer), 'application/json')).toBe(of(reordered.buffer, 'application/json'));
  });
});

describe('bodies that cannot be hashed exactly are refused, never written as {}', () => {
  class Dto {
    constructor(readonly a: number) {}
  }
  test.each([
    ['a Blob (the coordinator reads it; the synchronous fingerprint cannot)', new Blob(['x'])],
    ['a FormData', new FormData()],
    ['a Map', new Map([['a', 1]])],
    ['a Set', new Set([1])],
    ['a web ReadableStream', new ReadableStream()],
    ['a Node stream', new PassThrough()],
    ['an async iterable', { async *[Symbol.asyncIterator]() {} }],
    ['a Promise', Promise.resolve({ a: 1 })],
    ['a function', () => 1],
    ['a typed array inside parsed JSON', { data: new Uint16Array([1, 2]) }],
    ['an ArrayBuffer inside an array', [new ArrayBuffer(2)]],
    ['a Map inside parsed JSON', { nested: { m: new Map() } }],
    ['a Blob inside parsed JSON', { file: new Blob(['x']) }],
  ])('%s', (_, body) => {
    expect(() => computeFingerprint({ method: 'POST', route: '/up', body })).toThrow(TypeError);
  });

  test('a class instance without toJSON (a DTO) is hashed by its members, as JSON.stringify writes it', () => {
    const of = (body: unknown) => computeFingerprint({ method: 'POST', route: '/up', body });
    expect(of(new Dto(1))).toBe(of({ a: 1 }));
    expect(of({ nested: new Dto(1) })).toBe(of({ nested: { a: 1 } }));
    expect(of(new Dto(1))).not.toBe(of(new Dto(2)));
    expect(of({ at: new Date(0) })).toBe(of({ at: '1970-01-01T00:00:00.000Z' }));
  });
});
