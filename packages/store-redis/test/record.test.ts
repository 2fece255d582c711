import type { StoredResponse } from '@idem/core';
import { createRedisStore, MAX_HEADERS_BYTES } from '@idem/store-redis';
import { Redis } from 'ioredis';
import { v7 } from 'uuid';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  decodeRecord,
  decodeRecordHead,
  encodeCompletion,
  encodeInFlight,
  ownerHead,
} from '../src/record.js';
import { NOW_MS, reserveParams } from './support/params.js';
import { REDIS_URL, redisUp, sweep, uniquePrefix } from './support/servers.js';

const ref = { scope: 's', key: 'k' };
const ALL_BYTES = Uint8Array.from({ length: 256 }, (_, i) => i);
/** Every character the store keeps as it is: NUL, controls, quotes, non-BMP, the record's own digits. */
const HOSTILE = '\u0000\u0001"\\{}:%i0000c\u{1F600}\u00e9\u2028\uFFFF';

/** What the script's finalize writes: `c`, the in-flight value after the caller's owner head, the completion. */
function completed(inFlight: string, owner: string, response: StoredResponse): Buffer {
  const headers = JSON.stringify(response.headers);
  const [text, body] = encodeCompletion(response, headers, Buffer.byteLength(headers));
  const tail = Buffer.from(inFlight, 'utf8').subarray(Buffer.byteLength(ownerHead(owner)));
  return Buffer.concat([Buffer.from('c'), tail, Buffer.from(text, 'utf8'), body ?? Buffer.alloc(0)]);
}

describe('record encoding', () => {
  test('an in-flight record round-trips: owner and fingerprint with NUL, non-BMP, digits and quotes', () => {
    for (const [owner, fingerprint] of [
      ['o', 'f'],
      ['', ''],
      [HOSTILE, HOSTILE],
      ['\u{1F600}'.repeat(512), '\u00e9'.repeat(1024)],
      ['9'.repeat(1024), '0'.repeat(1024)],
    ] as const) {
      const params = {
        ...reserveParams('s', 'k'),
        owner,
        fingerprint,
        leaseUntilMs: 0,
        expiresAtMs: 2 ** 53 - 1,
      };
      const record = decodeRecord(ref, Buffer.from(encodeInFlight(params), 'utf8'));
      expect(record).toEqual({
        ...ref,
        fingerprint,
        owner,
        leaseUntilMs: 0,
        createdAtMs: params.nowMs,
        expiresAtMs: 2 ** 53 - 1,
        response: null,
      });
      expect(
        Buffer.from(encodeInFlight(params))
          .subarray(0, Buffer.byteLength(ownerHead(owner)))
          .toString(),
      ).toBe(ownerHead(owner));
    }
  });

  test('the owner head of an owner never starts the head of a longer owner it prefixes', () => {
    expect(ownerHead('ab').startsWith(ownerHead('a'))).toBe(false);
    expect(ownerHead('\u00e9')).toBe('i0002\u00e9');
  });

  test('a completed record round-trips: binary body, empty body, no body, omitted body, huge and hostile headers', () => {
    const params = { ...reserveParams('s', 'k'), owner: HOSTILE, fingerprint: HOSTILE };
    const inFlight = encodeInFlight(params);
    const bigHeaders = { 'x-big': 'é'.repeat((MAX_HEADERS_BYTES - 20) / 2) };
    const cases: StoredResponse[] = [
      { status: 200, headers: {}, body: ALL_BYTES },
      { status: 204, headers: {}, body: new Uint8Array(0) },
      { status: 204, headers: {}, body: null },
      { status: 999, headers: { a: 'b' }, body: null, bodyOmitted: true },
      { status: 100, headers: { [HOSTILE]: HOSTILE, 'content-type': 'x' }, body: Buffer.from('i0000c') },
      { status: 201, headers: bigHeaders, body: new Uint8Array(3 * 1024 * 1024).fill(0x63) },
    ];
    for (const response of cases) {
      const value = completed(inFlight, params.owner, response);
      const record = decodeRecord(ref, value);
      expect(record.owner).toBeNull();
      expect(record.fingerprint).toBe(HOSTILE);
      expect(record.createdAtMs).toBe(NOW_MS);
      expect(record.leaseUntilMs).toBe(params.leaseUntilMs);
      expect(record.expiresAtMs).toBe(params.expiresAtMs);
      expect(record.response?.status).toBe(response.status);
      expect(record.response?.headers).toEqual(response.headers);
      expect(record.response?.bodyOmitted).toBe(response.bodyOmitted);
      if (response.body === null) expect(record.response?.body).toBeNull();
      else
        expect(Buffer.from(record.response?.body as Uint8Array).equals(Buffer.from(response.body))).toBe(
          true,
        );
      // The head the script's `head` answers (the value without its body) decodes to the same record.
      const bodyBytes = response.body?.byteLength ?? 0;
      const head = value.subarray(0, value.length - bodyBytes);
      const decoded = decodeRecordHead(ref, head, value.length);
      expect(decoded.bodyBytes).toBe(response.body === null ? null : bodyBytes);
      expect(decoded.record.response?.status).toBe(response.status);
    }
  });

  test('a value of another layout is malformed, never a record', () => {
    const inFlight = Buffer.from(encodeInFlight(reserveParams('s', 'k')));
    const done = completed(inFlight.toString(), 'x', { status: 200, headers: {}, body: null });
    for (const value of [
      Buffer.alloc(0),
      Buffer.from('x'),
      Buffer.from('i'),
      Buffer.from('i00a1x'),
      Buffer.from('i 001x'),
      inFlight.subarray(0, inFlight.length - 1),
      Buffer.concat([inFlight, Buffer.from('!')]),
      Buffer.concat([done, Buffer.from('!')]), // bytes after a null body
      done.subarray(0, done.length - 1),
      Buffer.from(`c${'9'.repeat(16)}${'0'.repeat(32)}0000`), // a time beyond the safe integers, no completion
    ]) {
      expect(() => decodeRecord(ref, value), JSON.stringify(value.toString('latin1'))).toThrow(/malformed/);
    }
  });
});

const standalone = await redisUp();

describe.runIf(standalone)('record encoding through the scripts (ioredis)', () => {
  const prefix = uniquePrefix();
  let client: Redis;
  beforeAll(() => {
    client = new Redis(REDIS_URL);
  });
  afterAll(async () => {
    client.disconnect();
    await sweep('ioredis', prefix);
  });

  test('hostile owners, fingerprints, headers and bodies round-trip through reserve, renew, finalize, reserve', async () => {
    const store = createRedisStore(client, { prefix });
    const responses: StoredResponse[] = [
      { status: 200, headers: { [HOSTILE]: HOSTILE }, body: ALL_BYTES },
      { status: 204, headers: {}, body: new Uint8Array(0) },
      { status: 204, headers: {}, body: null },
      { status: 200, headers: {}, body: null, bodyOmitted: true },
      { status: 201, headers: { 'x-big': 'é'.repeat((MAX_HEADERS_BYTES - 20) / 2) }, body: ALL_BYTES },
    ];
    for (const response of responses) {
      const params = { ...reserveParams(HOSTILE, v7()), owner: `${HOSTILE}${v7()}`, fingerprint: HOSTILE };
      expect((await store.reserve(params)).outcome).toBe('reserved');
      expect(await store.renewLease({ ...params, leaseUntilMs: params.leaseUntilMs + 1 })).toBe(true);
      expect((await store.load(params))?.leaseUntilMs).toBe(params.leaseUntilMs + 1);
      expect(await store.finalize({ ...params, response, nowMs: NOW_MS })).toBe(true);
      const replay = await store.reserve({ ...params, owner: 'other' });
      expect(replay.outcome).toBe('exists');
      expect(replay.record.fingerprint).toBe(HOSTILE);
      expect(replay.record.owner).toBeNull();
      expect(replay.record.leaseUntilMs).toBe(params.leaseUntilMs + 1);
      expect(replay.record.response).toEqual(
        response.body === null ? response : { ...response, body: new Uint8Array(response.body) },
      );
      const [listed] = (await store.list({ scope: HOSTILE, limit: 1000, nowMs: NOW_MS })).records.filter(
        (r) => r.key === params.key,
      );
      expect(listed?.response?.status).toBe(response.status);
      expect(listed?.fingerprint).toBe(HOSTILE);
      expect(listed?.response?.bodyBytes).toBe(response.body?.byteLength ?? null);
    }
  });

  test('an owner that prefixes the record owner, or that it prefixes, is fenced out', async () => {
    const store = createRedisStore(client, { prefix });
    const params = { ...reserveParams('s', v7()), owner: 'ab' };
    await store.reserve(params);
    for (const owner of ['a', 'abc', '', 'aB']) {
      expect(
        await store.finalize({
          ...params,
          owner,
          response: { status: 200, headers: {}, body: null },
          nowMs: NOW_MS,
        }),
      ).toBe(false);
      expect(await store.renewLease({ ...params, owner, leaseUntilMs: NOW_MS + 1 })).toBe(false);
      expect(await store.release({ ...params, owner })).toBe(false);
    }
    expect((await store.load(params))?.owner).toBe('ab');
    // A takeover by a longer owner moves the tail: the new owner renews and finalizes, the old one cannot.
    const taken = await store.reserve({
      ...params,
      owner: 'a-much-longer-owner',
      nowMs: params.leaseUntilMs,
    });
    expect(taken).toMatchObject({ outcome: 'reserved', tookOver: true });
    expect(await store.renewLease({ ...params, leaseUntilMs: NOW_MS + 1 })).toBe(false);
    expect(
      await store.renewLease({ ...params, owner: 'a-much-longer-owner', leaseUntilMs: NOW_MS + 99_999 }),
    ).toBe(true);
    const record = await store.load(params);
    expect(record).toMatchObject({
      owner: 'a-much-longer-owner',
      leaseUntilMs: NOW_MS + 99_999,
      createdAtMs: NOW_MS,
    });
    expect(record?.expiresAtMs).toBe(params.expiresAtMs);
  });
});
