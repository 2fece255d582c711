import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import type { IdempotencyStore, StoredResponse } from '@idem/core';
import {
  BASE_MS,
  type ConformanceGroup,
  freshRef,
  reserveAt,
  resolveOptions,
  withStore,
} from '../harness.js';

async function roundTrip(store: IdempotencyStore, response: StoredResponse): Promise<StoredResponse | null> {
  const ref = freshRef();
  const params = reserveAt(ref, BASE_MS);
  await store.reserve(params);
  assert.equal(await store.finalize({ ...ref, owner: params.owner, response, nowMs: BASE_MS }), true);
  const viaLoad = (await store.load(ref))?.response ?? null;
  const viaReserve = await store.reserve(reserveAt(ref, BASE_MS + 1));
  assert.deepEqual(viaReserve.record.response, viaLoad, 'reserve and load MUST return the same response');
  return viaLoad;
}

function assertSameBytes(actual: Uint8Array | null | undefined, expected: Uint8Array): void {
  assert.ok(actual instanceof Uint8Array, 'the body MUST come back as a Uint8Array');
  assert.equal(actual.byteLength, expected.byteLength);
  assert.ok(
    Buffer.from(actual.buffer, actual.byteOffset, actual.byteLength).equals(expected),
    'bytes differ',
  );
}

/** Stored responses round-trip exactly. */
export const payloadGroup: ConformanceGroup = (harness, makeStore, options) => {
  const { describe, test } = harness;
  const { largeBodyBytes } = resolveOptions(options);
  describe('payloads', () => {
    test('a binary body MUST round-trip byte for byte (all 256 byte values)', () =>
      withStore(makeStore, async ({ store }) => {
        const body = Uint8Array.from({ length: 512 }, (_, i) => i % 256);
        const back = await roundTrip(store, { status: 200, headers: {}, body });
        assertSameBytes(back?.body, body);
      }));

    test(`a body of ${largeBodyBytes} bytes MUST round-trip byte for byte`, () =>
      withStore(makeStore, async ({ store }) => {
        const body = new Uint8Array(randomBytes(largeBodyBytes));
        const back = await roundTrip(store, {
          status: 200,
          headers: { 'content-type': 'application/octet-stream' },
          body,
        });
        assertSameBytes(back?.body, body);
      }));

    test('an empty body MUST stay empty and a null body MUST stay null', () =>
      withStore(makeStore, async ({ store }) => {
        const empty = await roundTrip(store, { status: 204, headers: {}, body: new Uint8Array(0) });
        assertSameBytes(empty?.body, new Uint8Array(0));
        const none = await roundTrip(store, { status: 204, headers: {}, body: null });
        assert.equal(none?.body, null);
      }));

    test('status and headers MUST round-trip, non-ASCII header values included', () =>
      withStore(makeStore, async ({ store }) => {
        const headers = {
          'content-type': 'application/json; charset=utf-8',
          location: '/v1/namespaces/caf\u00e9/tables/\u6771\u4eac',
          link: '</next>; rel="next"; title="\u{1F680} launch"',
          etag: 'W/"x"',
        };
        const body = new TextEncoder().encode('{"name":"caf\u00e9"}');
        const back = await roundTrip(store, { status: 201, headers, body });
        assert.equal(back?.status, 201);
        assert.deepEqual(back?.headers, headers);
        assertSameBytes(back?.body, body);
        assert.notEqual(back?.bodyOmitted, true, 'bodyOmitted MUST NOT appear when it was not set');
      }));

    test('bodyOmitted MUST be kept', () =>
      withStore(makeStore, async ({ store }) => {
        const back = await roundTrip(store, {
          status: 200,
          headers: { 'content-type': 'text/plain' },
          body: null,
          bodyOmitted: true,
        });
        assert.deepEqual(back, {
          status: 200,
          headers: { 'content-type': 'text/plain' },
          body: null,
          bodyOmitted: true,
        });
      }));

    test('a stored 4xx MUST round-trip like any other status', () =>
      withStore(makeStore, async ({ store }) => {
        const body = new TextEncoder().encode('{"error":"nope"}');
        const back = await roundTrip(store, {
          status: 409,
          headers: { 'content-type': 'application/json' },
          body,
        });
        assert.equal(back?.status, 409);
      }));
  });
};
