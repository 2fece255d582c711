import { canonicalJson, computeFingerprint } from '@idem/core';
import { describe, expect, test } from 'vitest';

const base = { method: 'POST', route: '/v1/orders' };

describe('request fingerprint', () => {
  test('is SHA-256 hex', () => {
    expect(computeFingerprint({ ...base, body: { a: 1 } })).toMatch(/^[0-9a-f]{64}$/);
  });

  test('does not depend on JSON key order or whitespace', () => {
    const json = { ...base, contentType: 'application/json' };
    const a = computeFingerprint({ ...json, body: { a: 1, b: { c: [1, 2], d: 'x' } } });
    const b = computeFingerprint({ ...json, body: { b: { d: 'x', c: [1, 2] }, a: 1 } });
    const raw = computeFingerprint({
      ...base,
      body: Buffer.from('{ "b": {"d":"x",  "c":[1,2]},\n "a": 1 }'),
      contentType: 'application/json; charset=utf-8',
    });
    const text = computeFingerprint({
      ...base,
      body: '{"a":1,"b":{"c":[1,2],"d":"x"}}',
      contentType: 'Application/JSON; charset=utf-8',
    });
    expect(b).toBe(a);
    expect(raw).toBe(a);
    expect(text).toBe(a);
  });

  test('changes with the method, the route, the query and the body', () => {
    const reference = computeFingerprint({ ...base, query: { a: '1' }, body: { a: 1 } });
    expect(computeFingerprint({ ...base, method: 'PUT', query: { a: '1' }, body: { a: 1 } })).not.toBe(
      reference,
    );
    expect(computeFingerprint({ ...base, route: '/v1/other', query: { a: '1' }, body: { a: 1 } })).not.toBe(
      reference,
    );
    expect(computeFingerprint({ ...base, query: { a: '2' }, body: { a: 1 } })).not.toBe(reference);
    expect(computeFingerprint({ ...base, query: { a: '1' }, body: { a: 2 } })).not.toBe(reference);
    expect(computeFingerprint({ ...base, query: { a: '1' }, body: [1] })).not.toBe(reference);
  });

  test('array order matters, object key order does not', () => {
    expect(computeFingerprint({ ...base, body: [1, 2] })).not.toBe(
      computeFingerprint({ ...base, body: [2, 1] }),
    );
  });

  test('the method is case-insensitive', () => {
    expect(computeFingerprint({ ...base, method: 'post' })).toBe(computeFingerprint(base));
  });

  test('the query is hashed as its pairs in the order sent', () => {
    const reference = computeFingerprint({ ...base, query: '?b=2&a=1&a=0' });
    expect(computeFingerprint({ ...base, query: 'b=2&a=1&a=0' })).toBe(reference);
    expect(computeFingerprint({ ...base, query: 'a=1&a=0&b=2' })).not.toBe(reference);
    expect(computeFingerprint({ ...base, query: new URLSearchParams('b=2&a=1&a=0') })).toBe(
      computeFingerprint({ ...base, query: { b: '2', a: ['1', '0'] } }),
    );
    expect(computeFingerprint({ ...base, query: {} })).toBe(computeFingerprint(base));
    expect(computeFingerprint({ ...base, query: '' })).toBe(computeFingerprint(base));
  });

  test('raw bytes that are not JSON are hashed as bytes, binary-safe', () => {
    const a = computeFingerprint({
      ...base,
      body: Uint8Array.from([0, 255, 1]),
      contentType: 'application/octet-stream',
    });
    const b = computeFingerprint({
      ...base,
      body: Uint8Array.from([0, 255, 2]),
      contentType: 'application/octet-stream',
    });
    expect(a).not.toBe(b);
    const broken = (text: string) =>
      computeFingerprint({ ...base, body: Buffer.from(text), contentType: 'application/json' });
    expect(broken('{"a":')).not.toBe(broken('{"a": '));
  });

  test('a JSON string body and the same text sent as bytes without a JSON type are different identities', () => {
    expect(computeFingerprint({ ...base, body: 'abc' })).not.toBe(
      computeFingerprint({ ...base, body: { abc: true } }),
    );
  });

  test('no body, an empty body and a null body are the same identity', () => {
    const none = computeFingerprint(base);
    expect(computeFingerprint({ ...base, body: null })).toBe(none);
    expect(computeFingerprint({ ...base, body: Buffer.alloc(0) })).toBe(none);
    expect(computeFingerprint({ ...base, body: '' })).toBe(none);
  });

  test('excluded fields do not count, at any depth and in every array element', () => {
    const options = { excludeFields: ['requestId', 'meta.traceId', 'items.nonce'] };
    const a = computeFingerprint(
      { ...base, body: { requestId: 1, meta: { traceId: 'x', v: 1 }, items: [{ nonce: 1, id: 1 }] } },
      options,
    );
    const b = computeFingerprint(
      { ...base, body: { requestId: 2, meta: { traceId: 'y', v: 1 }, items: [{ nonce: 2, id: 1 }] } },
      options,
    );
    const c = computeFingerprint(
      { ...base, body: { requestId: 2, meta: { traceId: 'y', v: 2 }, items: [{ nonce: 2, id: 1 }] } },
      options,
    );
    expect(b).toBe(a);
    expect(c).not.toBe(a);
  });

  test.each([
    [
      'nested objects and arrays',
      { b: [{ y: 1, x: [3, { q: null, p: true }] }], a: 'é', c: { '10': 1, '2': 2, z: -0.5 } },
    ],
    ['unicode and escaped keys', { é: 1, e: 2, 'a"b': 3, '\u{1F600}': 4, '': 5 }],
    ['undefined and functions dropped', { a: undefined, b: () => 1, c: [undefined, () => 1] }],
    [
      'many distinct keys in many objects (the general path)',
      Array.from({ length: 300 }, (_, i) => ({ [`k${i}`]: i })),
    ],
    ['a Date via toJSON (the general path)', { at: new Date(0), b: 1 }],
    ['a top-level primitive', 'just a string'],
    [
      'a flat object (the flat path)',
      { z: 1, a: 'x', m: null, t: true, u: undefined, f: () => 1, n: -0, '10': 1, '2': 2, é: 'é' },
    ],
    ['a flat object with NaN and Infinity', { a: Number.NaN, b: Number.POSITIVE_INFINITY, c: 1 }],
    ['a flat object with a bigint', { a: 10n ** 30n, b: 1 }],
    ['a flat object with an own __proto__ member', JSON.parse('{"__proto__":1,"a":2}')],
    ['a flat object with a toJSON member', { toJSON: () => ({ replaced: true }), a: 1 }],
    ['an empty object', {}],
  ])('the native and the general canonical JSON agree: %s', (_, body) => {
    const general = computeFingerprint({ ...base, body }, { excludeFields: ['no.such.field'] });
    expect(computeFingerprint({ ...base, body })).toBe(general);
  });

  test('canonical JSON matches JSON.stringify semantics with sorted keys, non-finite numbers apart from null', () => {
    expect(
      canonicalJson({ b: undefined, a: [undefined, 1.5, 'x', null, true], d: new Date(0), c: Number.NaN }),
    ).toBe('{"a":[null,1.5,"x",null,true],"c":NaN,"d":"1970-01-01T00:00:00.000Z"}');
  });

  test('hashes a 4 MiB JSON body deterministically (its cost per byte is measured by pnpm bench)', () => {
    const items = Array.from({ length: 40_000 }, (_, i) => ({
      id: i,
      name: `item-${i}`,
      tags: ['a', 'b'],
      pad: 'x'.repeat(60),
    }));
    const small = items.slice(0, 4_000);
    expect(computeFingerprint({ ...base, body: items })).toBe(
      computeFingerprint({ ...base, body: [...items] }),
    );
    expect(computeFingerprint({ ...base, body: small })).not.toBe(
      computeFingerprint({ ...base, body: items }),
    );
  });
});

describe('fingerprints are stable across releases', () => {
  // Stored records keep the fingerprint of their first request: a release that hashed the same request to
  // another value would answer every retry in flight across an upgrade with 422. These values are pinned.
  test.each([
    [
      'parsed JSON',
      { method: 'post', route: '/orders', path: '/orders', body: { b: [1, { z: 1, a: 'é' }], a: null } },
      '4c0d81a67f62f23719257b80831ea43cff828692a6f375c3167729f122b179ce',
    ],
    [
      'raw JSON with a query',
      {
        method: 'PUT',
        route: '/x/:id',
        path: '/x/1',
        query: 'a=1&b=2',
        body: '{"b":1, "a":[1e400]}',
        contentType: 'application/json',
      },
      'c17af12b2723b035e96e03fe09077cfc449e2e61ad10316bdda1e9a4fbb828a0',
    ],
    [
      'no body',
      { method: 'DELETE', route: '/x', path: '/x' },
      '45421f830c52c1e96a94bab479e4c2c937d4cf59bad069a0a5f1d151be09493e',
    ],
    [
      'raw bytes',
      { method: 'POST', route: '/up', path: '/up', body: Buffer.from('raw'), contentType: 'text/plain' },
      '785f62b06438acd1931362b144491d0cce81f77473d9cb79f063dea96e2fa49f',
    ],
  ])('%s', (_name, input, expected) => {
    expect(computeFingerprint(input)).toBe(expected);
  });
});
