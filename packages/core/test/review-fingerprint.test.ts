import vm from 'node:vm';
import { computeFingerprint, ErrorCode } from '@idem/core';
import { describe, expect, test } from 'vitest';
import { expectExecute, expectReject, expectReplay, post, setup } from './support/coordinator.js';

// Found by attacking issue 18 item 3 (binary views hashed by their bytes, unhashable bodies refused, media-type
// parameters in the identity). Each case was a collision (two different requests, one fingerprint) or a body
// hashed as no body at all.

const fp = (body: unknown, contentType?: string) =>
  computeFingerprint({ method: 'POST', route: '/r', body, contentType });

describe('review: bodies made in another realm (a vm context) are what they are, not `{}`', () => {
  const other = (source: string): unknown => vm.runInNewContext(source);

  test('a Map or Set from another realm is refused like one from this realm', () => {
    expect(() => fp(other('new Map([[1, 2]])'))).toThrow(/is a Map/);
    expect(() => fp(other('new Set([1])'))).toThrow(/is a Set/);
    expect(() => fp({ nested: other('new Map([[1, 2]])') })).toThrow(/at nested is a Map|is a Map/);
    expect(() => fp(other('Promise.resolve(1)'))).toThrow(TypeError);
  });

  test('an ArrayBuffer from another realm is hashed by its bytes (before: as `{}`, so any two collided)', () => {
    expect(fp(other('new Uint8Array([1, 2]).buffer'))).not.toBe(fp(other('new Uint8Array([3, 4]).buffer')));
    expect(fp(other('new Uint8Array([1, 2]).buffer'))).toBe(fp(new Uint8Array([1, 2])));
    expect(fp(other('new Uint8Array([1, 2]).buffer'))).not.toBe(fp({}));
    expect(() => fp({ nested: other('new ArrayBuffer(2)') })).toThrow(/inside a parsed value/);
  });
});

describe('review: iterables and boxed values JSON writes as `{}` are refused, never hashed alike', () => {
  test.each([
    ['URLSearchParams', () => new URLSearchParams('a=1'), () => new URLSearchParams('a=2')],
    [
      'a generator',
      () =>
        (function* () {
          yield 'a';
        })(),
      () =>
        (function* () {
          yield 'b';
        })(),
    ],
    ['a boxed number', () => Object(1) as unknown, () => Object(2) as unknown],
    ['Headers', () => new Headers({ a: '1' }), () => new Headers({ a: '2' })],
  ])('%s', (_, a, b) => {
    expect(() => fp(a())).toThrow(TypeError);
    expect(() => fp(b())).toThrow(TypeError);
    expect(() => fp({ inner: a() })).toThrow(TypeError);
  });

  test('a class instance with members of its own, iterable or not, is still written by them', () => {
    class Items {
      items = [1, 2];
      *[Symbol.iterator]() {
        yield* this.items;
      }
    }
    expect(fp(new Items())).toBe(fp({ items: [1, 2] }));
  });
});

describe('review: a detached buffer is refused, never hashed as no body', () => {
  const detached = <T extends ArrayBufferView | ArrayBuffer>(make: () => T): T => {
    const value = make();
    const buffer = value instanceof ArrayBuffer ? value : value.buffer;
    structuredClone(buffer, { transfer: [buffer as ArrayBuffer] });
    return value;
  };

  test('a Uint8Array over a transferred buffer (before: the fingerprint of no body)', () => {
    expect(() => fp(detached(() => new Uint8Array([1, 2, 3])))).toThrow(/detached ArrayBuffer/);
    expect(() => fp(detached(() => Buffer.from(new Uint8Array([1, 2, 3]).buffer)))).toThrow(/detached/);
  });

  test('an ArrayBuffer, a DataView or a Uint16Array over one: a clear error', () => {
    expect(() => fp(detached(() => new Uint8Array([1, 2]).buffer))).toThrow(/detached ArrayBuffer/);
    expect(() => fp(detached(() => new DataView(new ArrayBuffer(4))))).toThrow(/detached ArrayBuffer/);
    expect(() => fp(detached(() => new Uint16Array([1, 2])))).toThrow(/detached ArrayBuffer/);
  });

  test('an empty body of every kind is still no body', () => {
    const none = fp(undefined);
    for (const empty of [
      new Uint8Array(0),
      Buffer.alloc(0),
      new ArrayBuffer(0),
      new DataView(new ArrayBuffer(0)),
      '',
    ]) {
      expect(fp(empty)).toBe(none);
    }
    expect(fp(Buffer.from('abc').subarray(3))).toBe(none);
  });

  test('views over a SharedArrayBuffer hash by their bytes, JSON too', () => {
    const shared = new SharedArrayBuffer(8);
    new Uint8Array(shared).set(Buffer.from('{"a": 1}'));
    expect(fp(new Uint8Array(shared), 'application/json')).toBe(fp('{"a":1}', 'application/json'));
    expect(fp(new Uint16Array(shared), 'application/json')).toBe(fp('{"a":1}', 'application/json'));
    expect(fp(shared)).toBe(fp(Buffer.from('{"a": 1}')));
  });
});

describe('review: media-type parameters', () => {
  test('one parameter given twice keeps its order: which boundary a parser takes depends on it', () => {
    const body = '--A\r\n\r\n--B--\r\n';
    expect(fp(body, 'multipart/form-data; boundary=A; boundary=B')).not.toBe(
      fp(body, 'multipart/form-data; boundary=B; boundary=A'),
    );
    // Different names still sort, whatever order they come in.
    expect(fp(body, 'multipart/form-data; b=1; a=2; a=3')).toBe(
      fp(body, 'multipart/form-data; a=2; a=3; b=1'),
    );
  });

  test('hostile parameter lists neither throw nor take long', () => {
    for (const hostile of [
      'text/plain; a="unterminated',
      'text/plain;;;;',
      'text/plain; =x',
      'text/plain; a="x\\',
      'text/plain; a="\\',
      'text/plain; ="";=;"',
      `text/plain${'; a="'.repeat(20_000)}`,
      `text/plain${';'.repeat(20_000)}a=1`,
      `text/plain${';a=1'.repeat(20_000)}`,
    ]) {
      const startedMs = performance.now();
      expect(typeof fp('x', hostile)).toBe('string');
      expect(performance.now() - startedMs).toBeLessThan(500);
    }
  });
});

describe('review: a Blob whose bytes cannot be read', () => {
  test('begin rejects with the read error; nothing is reserved, and the next request runs', async () => {
    const { idem, backend } = setup();
    const failing = new Blob(['x']);
    failing.arrayBuffer = () => Promise.reject(new Error('blob read failed'));
    await expect(
      idem.begin(post({ body: failing, contentType: 'application/octet-stream' })),
    ).rejects.toThrow('blob read failed');
    expect(backend.calls).toEqual([]);
    expect(backend.records.size).toBe(0);
    const upload = post({ body: new Blob(['x']), contentType: 'application/octet-stream' });
    await expectExecute(await idem.begin(upload)).finish({ status: 201, headers: {}, body: 'ok' });
    expectReplay(await idem.begin(upload));
    expectReject(
      await idem.begin(post({ body: new Blob(['y']), contentType: 'application/octet-stream' })),
      422,
      ErrorCode.KeyReused,
    );
  });
});
