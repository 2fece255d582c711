import { callOutcome, createIdempotentFetch } from '@idem/client';
import { v7 } from 'uuid';
import { describe, expect, test } from 'vitest';
import { answer, fast, inProgress, networkError, ORDERS, post, scriptedFetch } from './support/fake-fetch.js';
import { withHttpServer } from './support/http-server.js';

/** A server whose every attempt takes 30 ms of the injected `clock`, answering `reply()`; `starts`: when. */
function slowServer(reply: () => Response) {
  let nowMs = 0;
  const starts: number[] = [];
  const { fetch } = scriptedFetch(() => {
    starts.push(nowMs);
    nowMs += 30;
    return reply();
  });
  return { fetch, starts, clock: { nowMs: () => nowMs } };
}

describe('every call ends: attempts, elapsed time and the key lifetime bound it', () => {
  test('maxElapsedMs: no attempt starts after it, by the injected clock', async () => {
    const { fetch, starts, clock } = slowServer(() => answer(503));
    const response = await createIdempotentFetch({
      fetch,
      ...fast,
      maxAttempts: 1000,
      maxElapsedMs: 100,
      clock,
    })(ORDERS, post());
    expect(callOutcome(response)?.gaveUp).toBe('max-elapsed');
    expect(starts).toEqual([0, 30, 60, 90]);
  });

  test('maxElapsedMs is checked again after the wait: a timer that fires late starts no attempt', async () => {
    let nowMs = 0;
    const { fetch, sent } = scriptedFetch(answer(503));
    const response = await createIdempotentFetch({
      fetch,
      ...fast,
      maxElapsedMs: 100,
      onRetry: () => {
        nowMs += 500; // the wait overshoots by far
      },
      clock: { nowMs: () => nowMs },
    })(ORDERS, post());
    expect(sent).toHaveLength(1);
    expect(callOutcome(response)?.gaveUp).toBe('max-elapsed');
  });

  test('a server that answers "in progress" forever, with Retry-After: 0, is bounded by maxElapsedMs', async () => {
    const { fetch, sent } = scriptedFetch(inProgress({ 'retry-after': '0' }));
    const started = Date.now();
    const response = await createIdempotentFetch({
      fetch,
      maxAttempts: 1_000_000,
      baseDelayMs: 1,
      maxDelayMs: 2,
      maxElapsedMs: 150,
    })(ORDERS, post());
    expect(response.status).toBe(409);
    expect(callOutcome(response)?.gaveUp).toBe('max-elapsed');
    expect(Date.now() - started).toBeLessThan(1000);
    expect(sent.length).toBeGreaterThan(5);
  });

  test('...and by the key lifetime: no attempt starts once the key is that old, by the injected clock', async () => {
    const { fetch, starts, clock } = slowServer(() => inProgress());
    const response = await createIdempotentFetch({
      fetch,
      ...fast,
      maxAttempts: 1_000_000,
      maxElapsedMs: 60_000,
      keyLifetimeMs: 100,
      clock,
    })(ORDERS, post());
    expect(callOutcome(response)?.gaveUp).toBe('key-lifetime');
    expect(starts).toEqual([0, 30, 60, 90]);
  });

  test("a caller's UUIDv7 key whose lifetime ends before the retry could start: sent once, not retried", async () => {
    const { fetch, sent } = scriptedFetch(answer(503, {}, { 'retry-after': '120' }), answer(201));
    const old = v7({ msecs: Date.now() - 4 * 60_000 });
    const response = await createIdempotentFetch({
      fetch,
      ...fast,
      keyLifetimeMs: 5 * 60_000,
      maxElapsedMs: 10 * 60_000,
    })(ORDERS, { ...post(), headers: { 'idempotency-key': old } });
    expect(response.status).toBe(503);
    expect(sent.map((s) => s.headers.get('idempotency-key'))).toEqual([old]);
    expect(callOutcome(response)?.gaveUp).toBe('key-lifetime');
  });

  test("a caller's key that is no UUIDv7 counts its lifetime from the first attempt", async () => {
    const { fetch, sent } = scriptedFetch(answer(503), answer(201));
    await createIdempotentFetch({ fetch, ...fast, keyLifetimeMs: 60_000 })(ORDERS, {
      ...post(),
      headers: { 'idempotency-key': 'order-1' },
    });
    expect(sent).toHaveLength(2);
  });

  test('a lifetime of 0 allows the first attempt and no retry', async () => {
    const { fetch, sent } = scriptedFetch(networkError(), answer(201));
    const call = createIdempotentFetch({ fetch, ...fast, keyLifetimeMs: 0 })(ORDERS, post());
    await expect(call).rejects.toThrow(TypeError);
    expect(sent).toHaveLength(1);
  });

  test('attemptTimeoutMs: a hung attempt is abandoned and retried with the same key', async () => {
    const seen: string[] = [];
    await withHttpServer(
      (req, res) => {
        seen.push(String(req.headers['idempotency-key']));
        if (seen.length === 1) return; // never answers
        res.writeHead(201, { 'content-type': 'application/json' }).end('{"ok":true}');
      },
      async (url) => {
        const started = Date.now();
        const response = await createIdempotentFetch({ ...fast, attemptTimeoutMs: 100 })(
          `${url}/orders`,
          post(),
        );
        expect(response.status).toBe(201);
        expect(await response.json()).toEqual({ ok: true });
        expect(Date.now() - started).toBeGreaterThanOrEqual(95);
        expect(seen).toHaveLength(2);
        expect(seen[1]).toBe(seen[0]);
      },
    );
  });
});
