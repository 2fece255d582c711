import {
  callOutcome,
  createIdempotentFetch,
  type IdempotentFetchOptions,
  isIdemClientError,
} from '@idem/client';
import { v7 } from 'uuid';
import { describe, expect, test } from 'vitest';
import { answer, fast, ORDERS, scriptedFetch } from './support/fake-fetch.js';

/** The injected clock's time: every key's age below is counted against it. */
const NOW_MS = Date.UTC(2026, 0, 15, 12);
const MINUTE = 60_000;
const LIFETIME_MS = 5 * MINUTE;
const CATALOG = 'http://127.0.0.1:9/catalog';

/** A caller's UUIDv7 key minted `ageMs` before the clock's now. */
const keyAged = (ageMs: number) => v7({ msecs: NOW_MS - ageMs });

interface ExpiryCase {
  readonly name: string;
  /** The call's input and init, carrying the caller's key. */
  readonly call: (key: string) => [string | Request, RequestInit];
  readonly ageMs: number;
  readonly options?: IdempotentFetchOptions;
}

const init = (key: string, more: RequestInit = {}): RequestInit => ({
  method: 'POST',
  headers: { 'content-type': 'application/json', 'idempotency-key': key },
  body: '{"item":"book"}',
  ...more,
});

const expired: ExpiryCase[] = [
  { name: 'older than the lifetime', call: (key) => [ORDERS, init(key)], ageMs: 10 * MINUTE },
  { name: 'exactly the lifetime old', call: (key) => [ORDERS, init(key)], ageMs: LIFETIME_MS },
  {
    name: 'in a Request',
    call: (key) => [new Request(ORDERS, init(key)), {}],
    ageMs: 10 * MINUTE,
  },
  {
    name: 'under another header name',
    call: (key) => [ORDERS, { method: 'PUT', headers: { 'x-request-id': key }, body: 'x' }],
    ageMs: 10 * MINUTE,
    options: { headerName: 'X-Request-Id' },
  },
  {
    name: 'past the lifetime a catalog advertises (PT1M), though within keyLifetimeMs',
    call: (key) => [`${CATALOG}/v1/namespaces`, init(key)],
    ageMs: 2 * MINUTE,
    options: { discoverKeyLifetime: CATALOG },
  },
];

/** A fetch whose mutations answer 201, and whose catalog advertises a lifetime of one minute. */
function server() {
  return scriptedFetch((sent) =>
    sent.url.endsWith('/v1/config') ? answer(200, { 'idempotency-key-lifetime': 'PT1M' }) : answer(201),
  );
}

describe("a caller's key already past its lifetime is refused before the first attempt", () => {
  test.each(expired)('$name: nothing is sent, IDEMPOTENCY_KEY_EXPIRED', async (row) => {
    const { fetch, sent } = server();
    const key = keyAged(row.ageMs);
    const [input, callInit] = row.call(key);
    const error = await createIdempotentFetch({
      fetch,
      ...fast,
      keyLifetimeMs: LIFETIME_MS,
      clock: { nowMs: () => NOW_MS },
      ...row.options,
    })(input, callInit).catch((e: unknown) => e);
    expect(isIdemClientError(error) && error.code).toBe('IDEMPOTENCY_KEY_EXPIRED');
    expect(String((error as Error).message)).toContain(key);
    // The bound that stops retries, met before the first attempt.
    expect(callOutcome(error)).toEqual({
      key,
      attempts: 0,
      replayed: false,
      elapsedMs: 0,
      gaveUp: 'key-lifetime',
    });
    expect(sent.filter((s) => s.method !== 'GET')).toHaveLength(0);
  });

  test('refused before a one-shot body is read: the caller can still send that stream with a fresh key', async () => {
    const { fetch, sent } = server();
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(new TextEncoder().encode('payload'));
        controller.close();
      },
    });
    const idempotentFetch = createIdempotentFetch({
      fetch,
      ...fast,
      keyLifetimeMs: LIFETIME_MS,
      clock: { nowMs: () => NOW_MS },
    });
    const refused = idempotentFetch(
      ORDERS,
      init(keyAged(10 * MINUTE), { body, duplex: 'half' } as RequestInit),
    );
    await expect(refused).rejects.toMatchObject({ code: 'IDEMPOTENCY_KEY_EXPIRED' });
    expect(body.locked).toBe(false);
    const response = await idempotentFetch(ORDERS, { method: 'POST', body, duplex: 'half' } as RequestInit);
    expect(response.status).toBe(201);
    expect(sent.map((s) => s.body)).toEqual(['payload']);
  });

  test('a key that expires while its one-shot body is read is refused then, and nothing is sent', async () => {
    let nowMs = NOW_MS;
    const { fetch, sent } = server();
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        nowMs += 2 * MINUTE; // a slow source: the key's last two minutes go by while it is read
        controller.enqueue(new TextEncoder().encode('slow'));
        controller.close();
      },
    });
    const error = await createIdempotentFetch({
      fetch,
      ...fast,
      keyLifetimeMs: LIFETIME_MS,
      clock: { nowMs: () => nowMs },
    })(ORDERS, init(keyAged(4 * MINUTE), { body, duplex: 'half' } as RequestInit)).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'IDEMPOTENCY_KEY_EXPIRED' });
    expect(sent).toHaveLength(0);
  });
});

describe('keys within their lifetime go', () => {
  test.each<[string, () => string, IdempotentFetchOptions?]>([
    ['a UUIDv7 key 1 ms short of the lifetime', () => keyAged(LIFETIME_MS - 1)],
    ['a key that is no UUIDv7 (its lifetime counts from the first attempt)', () => 'order-1'],
    ['a UUIDv7 key from the future (its lifetime counts from now)', () => keyAged(-10 * MINUTE)],
    ['a UUIDv7 key of this very ms, with a lifetime of 0', () => keyAged(0), { keyLifetimeMs: 0 }],
  ])('%s', async (_, makeKey, options) => {
    const key = makeKey();
    const { fetch, sent } = server();
    const response = await createIdempotentFetch({
      fetch,
      ...fast,
      keyLifetimeMs: LIFETIME_MS,
      clock: { nowMs: () => NOW_MS },
      ...options,
    })(ORDERS, init(key));
    expect(response.status).toBe(201);
    expect(sent.map((s) => s.headers.get('idempotency-key'))).toEqual([key]);
  });
});
