import { callOutcome, createIdempotentFetch, newIdempotencyKey } from '@idem/client';
import { validate, version } from 'uuid';
import { describe, expect, test } from 'vitest';
import { answer, fast, networkError, ORDERS, post, scriptedFetch } from './support/fake-fetch.js';

describe('keys', () => {
  test('newIdempotencyKey makes UUIDv7 keys a server accepts, distinct and ordered by time', () => {
    const keys = Array.from({ length: 1_000 }, () => newIdempotencyKey());
    // RFC 9562: version 7, variant 10, lower-case hex: what a server's UUIDv7 check accepts as it is.
    for (const key of keys)
      expect(key).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(new Set(keys).size).toBe(keys.length);
    const at = (key: string) => Number.parseInt(key.slice(0, 8) + key.slice(9, 13), 16);
    expect(Math.abs(at(keys[0] as string) - Date.now())).toBeLessThan(5_000);
    expect([...keys].sort()).toEqual(keys); // uuid's v7 is monotonic within a millisecond
  });

  test.each(['POST', 'PUT', 'PATCH', 'DELETE'])('%s gets a fresh UUIDv7 Idempotency-Key', async (method) => {
    const { fetch, sent } = scriptedFetch(answer(200));
    const response = await createIdempotentFetch({ fetch })(ORDERS, { method, body: 'x' });
    const key = sent[0]?.headers.get('idempotency-key') as string;
    expect(validate(key) && version(key)).toBe(7);
    expect(callOutcome(response)?.key).toBe(key);
  });

  test('every retry of one call carries the same key and the same body', async () => {
    const { fetch, sent } = scriptedFetch(networkError(), answer(503), answer(502), answer(201));
    const response = await createIdempotentFetch({ fetch, ...fast })(ORDERS, post({ n: 1 }));
    expect(response.status).toBe(201);
    expect(sent).toHaveLength(4);
    expect(new Set(sent.map((s) => s.headers.get('idempotency-key'))).size).toBe(1);
    expect(new Set(sent.map((s) => s.body))).toEqual(new Set(['{"n":1}']));
    expect(callOutcome(response)).toMatchObject({ attempts: 4, gaveUp: undefined, replayed: false });
  });

  test("the caller's own key is kept, whatever the header's case, and never replaced", async () => {
    const { fetch, sent } = scriptedFetch(answer(503), answer(200));
    const mine = 'order-42-attempt';
    await createIdempotentFetch({ fetch, ...fast })(ORDERS, {
      method: 'POST',
      headers: { 'IDEMPOTENCY-KEY': mine },
    });
    expect(sent.map((s) => s.headers.get('idempotency-key'))).toEqual([mine, mine]);
  });

  test('two calls never share a key, even 1,000 at once', async () => {
    const { fetch, sent } = scriptedFetch(answer(200));
    const idempotentFetch = createIdempotentFetch({ fetch });
    await Promise.all(Array.from({ length: 1000 }, () => idempotentFetch(ORDERS, post())));
    expect(new Set(sent.map((s) => s.headers.get('idempotency-key'))).size).toBe(1000);
  });

  test('safe methods get no key (and are retried); other methods outside `methods` go once, untouched', async () => {
    const { fetch, sent } = scriptedFetch(answer(503), answer(200));
    const idempotentFetch = createIdempotentFetch({ fetch, ...fast, methods: ['POST'] });
    expect((await idempotentFetch(ORDERS)).status).toBe(200);
    expect(sent.map((s) => s.headers.has('idempotency-key'))).toEqual([false, false]);
    const once = scriptedFetch(answer(503));
    const deleteOnce = createIdempotentFetch({ fetch: once.fetch, ...fast, methods: ['POST'] });
    expect((await deleteOnce(ORDERS, { method: 'DELETE' })).status).toBe(503);
    expect(once.sent).toHaveLength(1);
    expect(once.sent[0]?.headers.has('idempotency-key')).toBe(false);
  });

  test('retrySafeMethods: false sends a GET once', async () => {
    const { fetch, sent } = scriptedFetch(answer(503));
    await createIdempotentFetch({ fetch, ...fast, retrySafeMethods: false })(ORDERS);
    expect(sent).toHaveLength(1);
  });

  test('methods match in any case, and headerName names the header', async () => {
    const { fetch, sent } = scriptedFetch(answer(200));
    await createIdempotentFetch({ fetch, headerName: 'X-Request-Key' })(ORDERS, {
      method: 'post',
      body: 'x',
    });
    expect(sent[0]?.headers.get('x-request-key')).toMatch(/^[0-9a-f-]{36}$/);
    expect(sent[0]?.headers.has('idempotency-key')).toBe(false);
  });

  test("a given fetch is called as a plain function, as a browser's fetch requires", async () => {
    const { fetch } = scriptedFetch(answer(201));
    const selfish = function (this: unknown, input: string | URL | Request, init?: RequestInit) {
      if (this !== undefined && this !== globalThis) throw new Error('Illegal invocation');
      return fetch(input, init);
    };
    expect((await createIdempotentFetch({ fetch: selfish })(ORDERS, post())).status).toBe(201);
  });

  test('bad options are refused where the fetch is made', () => {
    expect(() => createIdempotentFetch({ maxAttempts: 0 })).toThrow(RangeError);
    expect(() => createIdempotentFetch({ baseDelayMs: -1 })).toThrow(RangeError);
    expect(() => createIdempotentFetch({ retryOn: [42] })).toThrow(RangeError);
    expect(() => createIdempotentFetch({ headerName: 'two words' })).toThrow(TypeError);
    expect(() => createIdempotentFetch({ attemptTimeoutMs: 0 })).toThrow(RangeError);
    expect(() => createIdempotentFetch({ discoverKeyLifetime: 'not a url' })).toThrow(TypeError);
  });
});
