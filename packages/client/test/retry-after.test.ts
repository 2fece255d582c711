import { callOutcome, createIdempotentFetch, parseRetryAfterMs, type RetryEvent } from '@idem/client';
import { describe, expect, test } from 'vitest';
import { answer, fast, ORDERS, post, scriptedFetch } from './support/fake-fetch.js';

const NOW_MS = Date.UTC(2026, 0, 2, 3, 4, 5);

describe('parseRetryAfterMs', () => {
  test.each([
    ['2', 2000],
    [' 3 ', 3000],
    ['0', 0],
    ['Fri, 02 Jan 2026 03:04:15 GMT', 10_000],
    ['Friday, 02-Jan-26 03:04:15 GMT', 10_000],
    ['Fri Jan  2 03:04:15 2026', 10_000],
    ['Thu, 01 Jan 1970 00:00:00 GMT', 0], // a date in the past: now
    ['9'.repeat(400), Number.POSITIVE_INFINITY],
  ])('%j → %d ms', (value, expected) => {
    expect(parseRetryAfterMs(value, NOW_MS)).toBe(expected);
  });

  test.each([null, '-5', '1.5', '', 'soon', '2026-01-02T03:04:15Z', 'Fri, 02 Jan 2026 03:04:15 +0100', '-1'])(
    '%j is no Retry-After',
    (value) => {
      expect(parseRetryAfterMs(value, NOW_MS)).toBeUndefined();
    },
  );
});

/** Retry once after `retryAfter` and report the wait the client chose. */
async function waitFor(retryAfter: string, options: Parameters<typeof createIdempotentFetch>[0] = {}) {
  const events: RetryEvent[] = [];
  const { fetch, sent } = scriptedFetch(answer(503, {}, { 'retry-after': retryAfter }), answer(201));
  const response = await createIdempotentFetch({
    fetch,
    ...fast,
    onRetry: (e) => events.push(e),
    ...options,
  })(ORDERS, post());
  return { response, sent, delays: events.map((e) => e.delayMs) };
}

describe('Retry-After is honoured as the least wait', () => {
  test('0: retried at once', async () => {
    const { response, delays } = await waitFor('0');
    expect(response.status).toBe(201);
    expect(delays).toEqual([0]);
  });

  test('a longer backoff still applies over a short Retry-After', async () => {
    const { delays } = await waitFor('0', { baseDelayMs: 30, maxDelayMs: 1000, random: () => 0.5 });
    expect(delays).toEqual([15]);
  });

  test('negative or malformed: ignored, the backoff decides', async () => {
    for (const value of ['-5', 'soon']) {
      const { response, delays } = await waitFor(value, {
        baseDelayMs: 8,
        maxDelayMs: 1000,
        random: () => 0.5,
      });
      expect(response.status).toBe(201);
      expect(delays).toEqual([4]);
    }
  });

  test('an HTTP date in the past: retried at once', async () => {
    expect((await waitFor('Thu, 01 Jan 1970 00:00:00 GMT')).delays).toEqual([0]);
  });

  test('an HTTP date ahead: waited for, by the injected clock', async () => {
    const dateMs = Date.UTC(2026, 0, 2, 3, 4, 5);
    const started = Date.now();
    const { delays } = await waitFor(new Date(dateMs).toUTCString(), { clock: { nowMs: () => dateMs - 40 } });
    expect(delays).toEqual([40]);
    expect(Date.now() - started).toBeGreaterThanOrEqual(35);
  });

  test('one longer than what is left of maxElapsedMs: the answer is returned at once, not waited for', async () => {
    for (const value of ['3600', '9'.repeat(400)]) {
      const started = Date.now();
      const { response, sent } = await waitFor(value, { maxElapsedMs: 1000 });
      expect(response.status).toBe(503);
      expect(response.headers.get('retry-after')).toBe(value);
      expect(sent).toHaveLength(1);
      expect(callOutcome(response)?.gaveUp).toBe('max-elapsed');
      expect(Date.now() - started).toBeLessThan(500);
    }
  });

  test('one past the key lifetime: the answer is returned, the key is not reused', async () => {
    const { response, sent } = await waitFor('120', { keyLifetimeMs: 60_000, maxElapsedMs: 600_000 });
    expect(response.status).toBe(503);
    expect(sent).toHaveLength(1);
    expect(callOutcome(response)?.gaveUp).toBe('key-lifetime');
  });
});
