import { randomInt } from 'node:crypto';
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

  test('charset and case of the content type do not change the identity; the media type does', () => {
    const of = (contentType: string) => post('{"a":1}', { contentType });
    expect(of('Application/JSON; charset=utf-8')).toBe(of('application/json'));
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
