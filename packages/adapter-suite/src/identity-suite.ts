import assert from 'node:assert/strict';
import {
  type CallInit,
  call,
  newKey,
  type ServerContext,
  type ServerOptions,
  type SuiteHarness,
} from './support.js';

interface Pair {
  readonly name: string;
  readonly first: { path: string } & CallInit;
  readonly second: { path: string } & CallInit;
}

/**
 * Two different requests under one key: the second must never be answered with the first one's replay. Each
 * pair is a collision an earlier fingerprint (or a naive one) had.
 */
const DIFFERENT: readonly Pair[] = [
  { name: 'path parameters', first: { path: '/items/1' }, second: { path: '/items/2' } },
  {
    name: 'a percent-encoded path parameter',
    first: { path: '/items/a%1Fb' },
    second: { path: '/items/a%1Fc' },
  },
  { name: 'the query', first: { path: '/items/1?a=1' }, second: { path: '/items/1?a=2' } },
  {
    name: 'a nested query against a JSON-looking value',
    first: { path: '/items/1?a[b]=1' },
    second: { path: `/items/1?a=${encodeURIComponent('{"b":"1"}')}` },
  },
  {
    name: 'the order of one name’s values',
    first: { path: '/items/1?a=1&a=2' },
    second: { path: '/items/1?a=2&a=1' },
  },
  {
    name: 'a huge exponent against null',
    first: { path: '/items/1', rawBody: '{"n":1e400}' },
    second: { path: '/items/1', rawBody: '{"n":null}' },
  },
  {
    name: 'two huge exponents',
    first: { path: '/items/1', rawBody: '{"n":1e400}' },
    second: { path: '/items/1', rawBody: '{"n":1e401}' },
  },
  {
    name: 'integers beyond 2^53',
    first: { path: '/items/1', rawBody: '{"id":12345678901234567890}' },
    second: { path: '/items/1', rawBody: '{"id":12345678901234567891}' },
  },
  {
    name: '__proto__ as an ordinary member',
    first: { path: '/items/1', rawBody: '{"__proto__":1,"x":{"y":2}}' },
    second: { path: '/items/1', rawBody: '{"x":{"y":2}}' },
  },
];

/** The media type the test apps hand over as the body kind named by the `x-body-kind` request header. */
export const BODY_KIND_TYPE = 'application/x-idem-kind';

/** What an app, a parser or a fetch-style host may hand the adapter as the body of one request. */
export const BODY_KINDS = [
  'buffer',
  'uint8array',
  'arraybuffer',
  'dataview',
  'uint16array',
  'float64array',
  'blob',
  'string',
] as const;
export type BodyKind = (typeof BODY_KINDS)[number];

/**
 * The received bytes as `kind`: the test apps' parser for {@link BODY_KIND_TYPE} sets this as the body, the
 * way a framework, a body parser or the host's own middleware would. Lengths are multiples of 8, so every
 * view covers them whole.
 */
export function toBodyKind(kind: string | undefined, bytes: Uint8Array): unknown {
  const copy = (): ArrayBuffer => new Uint8Array(bytes).buffer;
  switch (kind as BodyKind) {
    case 'buffer':
      return Buffer.from(bytes);
    case 'uint8array':
      return new Uint8Array(bytes);
    case 'arraybuffer':
      return copy();
    case 'dataview':
      return new DataView(copy());
    case 'uint16array':
      return new Uint16Array(copy());
    case 'float64array':
      return new Float64Array(copy());
    case 'blob':
      return new Blob([new Uint8Array(bytes)]);
    case 'string':
      return Buffer.from(bytes).toString('latin1');
    default:
      return bytes;
  }
}

/** Eight bytes that are not text, and another eight differing in the last one. */
const BYTES_A = Uint8Array.from([0, 1, 2, 3, 4, 5, 0xfe, 0xff]);
const BYTES_B = Uint8Array.from([0, 1, 2, 3, 4, 5, 0xfe, 0xfe]);

export function identitySuite(
  harness: SuiteHarness,
  withServer: (options: ServerOptions, body: (context: ServerContext) => Promise<void>) => Promise<void>,
): void {
  const { describe, test } = harness;
  describe('request identity', () => {
    for (const pair of DIFFERENT) {
      test(`one key on two requests that differ by ${pair.name}: the second is refused, never replayed`, () =>
        withServer({}, async ({ url, business }) => {
          const key = newKey();
          const first = await call(url, pair.first.path, { ...pair.first, key });
          const second = await call(url, pair.second.path, { ...pair.second, key });
          assert.notEqual(second.headers.get('idempotent-replayed'), 'true', 'not a replay of the first');
          if (first.status === 400) {
            // The framework refused the first body itself (Fastify refuses __proto__): nothing was reserved.
            assert.equal(business.calls('items'), second.status === 201 ? 1 : 0);
            return;
          }
          assert.equal(first.status, 201);
          assert.equal(second.status, 422);
          assert.equal((second.json() as { error: { code: string } }).error.code, 'IDEMPOTENCY_KEY_REUSED');
          assert.equal(business.calls('items'), 1);
        }));
    }

    for (const kind of BODY_KINDS) {
      test(`a body handed over as ${kind}: the same bytes replay, other bytes or another boundary are refused`, () =>
        withServer({}, async ({ url, business }) => {
          const key = newKey();
          const send = (rawBytes: Uint8Array, contentType = BODY_KIND_TYPE) =>
            call(url, '/items/1', { key, rawBytes, contentType, headers: { 'x-body-kind': kind } });
          const first = await send(BYTES_A);
          assert.equal(first.status, 201, first.bytes.toString());
          const retry = await send(BYTES_A);
          assert.equal(retry.headers.get('idempotent-replayed'), 'true');
          assert.ok(retry.bytes.equals(first.bytes));
          for (const [name, other] of [
            ['other bytes', await send(BYTES_B)],
            ['a boundary parameter', await send(BYTES_A, `${BODY_KIND_TYPE}; boundary=A`)],
            ['a charset parameter', await send(BYTES_A, `${BODY_KIND_TYPE}; charset=latin1`)],
          ] as const) {
            assert.equal(other.status, 422, `${name}: ${other.status} ${other.bytes.toString()}`);
          }
          assert.equal(business.calls('items'), 1);
        }));
    }

    test('two multipart boundaries over the same bytes are two requests', () =>
      withServer({}, async ({ url, business }) => {
        const key = newKey();
        const body = '--A\r\ncontent-disposition: form-data; name="a"\r\n\r\n1\r\n--A--\r\n';
        const first = await call(url, '/items/1', {
          key,
          rawBody: body,
          contentType: 'multipart/form-data; boundary=A',
        });
        assert.equal(first.status, 201, first.bytes.toString());
        const other = await call(url, '/items/1', {
          key,
          rawBody: body,
          contentType: 'multipart/form-data; boundary=B',
        });
        assert.equal(other.status, 422);
        const retry = await call(url, '/items/1', {
          key,
          rawBody: body,
          contentType: 'multipart/form-data; boundary="A"',
        });
        assert.equal(retry.headers.get('idempotent-replayed'), 'true');
        assert.equal(business.calls('items'), 1);
      }));

    test('the same request written differently (key order, whitespace, escapes) replays', () =>
      withServer({}, async ({ url, business }) => {
        const key = newKey();
        const first = await call(url, '/items/1?x=1', { key, rawBody: '{"a":1,"b":[1,2],"s":"é"}' });
        const retry = await call(url, '/items/1?x=1', {
          key,
          rawBody: ' { "s" : "\\u00e9", "b":[1, 2], "a":1 }',
        });
        assert.equal(retry.headers.get('idempotent-replayed'), 'true');
        assert.ok(retry.bytes.equals(first.bytes));
        assert.equal(business.calls('items'), 1);
      }));
  });
}
