import { callOutcome, createIdempotentFetch, isReplay, type RetryEvent } from '@idem/client';
import { describe, expect, test } from 'vitest';
import { answer, fast, inProgress, networkError, ORDERS, post, scriptedFetch } from './support/fake-fetch.js';

describe('what is retried', () => {
  test.each([429, 502, 503, 504])('%i is retried', async (status) => {
    const { fetch, sent } = scriptedFetch(answer(status), answer(201));
    expect((await createIdempotentFetch({ fetch, ...fast })(ORDERS, post())).status).toBe(201);
    expect(sent).toHaveLength(2);
  });

  test.each([400, 401, 403, 404, 410, 412, 422, 500, 501])(
    '%i is final: returned as it is',
    async (status) => {
      const { fetch, sent } = scriptedFetch(answer(status, { mine: status }), answer(201));
      const response = await createIdempotentFetch({ fetch, ...fast })(ORDERS, post());
      expect(response.status).toBe(status);
      expect(await response.json()).toEqual({ mine: status });
      expect(sent).toHaveLength(1);
    },
  );

  test('a 409 without Retry-After and without the in-progress code is a real conflict: final', async () => {
    const conflict = {
      error: { message: 'Table already exists', type: 'AlreadyExistsException', code: 409 },
    };
    const { fetch, sent } = scriptedFetch(answer(409, conflict), answer(201));
    const response = await createIdempotentFetch({ fetch, ...fast })(ORDERS, post());
    expect(response.status).toBe(409);
    expect(await response.json()).toEqual(conflict); // the body is still there for the caller
    expect(sent).toHaveLength(1);
  });

  test.each([
    ['the coordinator code', inProgress()],
    ['a Retry-After', answer(409, { error: { type: 'CommitFailedException' } }, { 'retry-after': '0' })],
  ])('a 409 that says "in progress" (%s) is retried', async (_, first) => {
    const { fetch, sent } = scriptedFetch(first, answer(201));
    expect((await createIdempotentFetch({ fetch, ...fast })(ORDERS, post())).status).toBe(201);
    expect(sent).toHaveLength(2);
  });

  test('a 409 whose body is not JSON, empty, or too large to be an error is final', async () => {
    for (const body of [
      'not json',
      '',
      JSON.stringify({ error: { code: 'IDEMPOTENCY_IN_PROGRESS' }, pad: 'x'.repeat(70_000) }),
    ]) {
      const { fetch, sent } = scriptedFetch(new Response(body, { status: 409 }), answer(201));
      const response = await createIdempotentFetch({ fetch, ...fast })(ORDERS, post());
      expect(response.status).toBe(409);
      expect(await response.text()).toBe(body);
      expect(sent).toHaveLength(1);
    }
  });

  test('retryOn replaces the statuses retried; an in-progress 409 stays retried', async () => {
    const { fetch, sent } = scriptedFetch(answer(500), answer(503), inProgress(), answer(201));
    const response = await createIdempotentFetch({ fetch, ...fast, retryOn: [500] })(ORDERS, post());
    expect(response.status).toBe(503);
    expect(sent).toHaveLength(2);
  });

  test('a network error (TypeError) is retried; any other error is thrown at once', async () => {
    const { fetch, sent } = scriptedFetch(networkError(), answer(201));
    expect((await createIdempotentFetch({ fetch, ...fast })(ORDERS, post())).status).toBe(201);
    expect(sent).toHaveLength(2);
    const failing = scriptedFetch(new RangeError('a bug in a custom fetch'), answer(201));
    const call = createIdempotentFetch({ fetch: failing.fetch, ...fast })(ORDERS, post());
    await expect(call).rejects.toThrow(RangeError);
    expect(failing.sent).toHaveLength(1);
  });

  test("a malformed request throws fetch's own TypeError before anything is sent", async () => {
    const { fetch, sent } = scriptedFetch(answer(200));
    const idempotentFetch = createIdempotentFetch({ fetch, ...fast });
    await expect(idempotentFetch('http://bad host/', post())).rejects.toThrow(TypeError);
    await expect(idempotentFetch(ORDERS, { method: 'POST', headers: { 'bad name': 'x' } })).rejects.toThrow(
      TypeError,
    );
    await expect(idempotentFetch(ORDERS, { method: 'GET', body: 'x' })).rejects.toThrow(TypeError);
    expect(sent).toHaveLength(0);
  });
});

describe('when retrying stops', () => {
  test('maxAttempts: the last retryable answer is returned, with gaveUp', async () => {
    const { fetch, sent } = scriptedFetch(answer(503, { n: 'last' }));
    const response = await createIdempotentFetch({ fetch, ...fast, maxAttempts: 3 })(ORDERS, post());
    expect(response.status).toBe(503);
    expect(await response.json()).toEqual({ n: 'last' }); // its body is intact
    expect(sent).toHaveLength(3);
    expect(callOutcome(response)).toMatchObject({ attempts: 3, gaveUp: 'max-attempts' });
  });

  test('maxAttempts: the last network error is thrown, and its outcome recorded', async () => {
    const error = networkError();
    const { fetch, sent } = scriptedFetch(error);
    const call = createIdempotentFetch({ fetch, ...fast, maxAttempts: 2 })(ORDERS, post());
    await expect(call).rejects.toBe(error);
    expect(sent).toHaveLength(2);
    expect(callOutcome(error)).toMatchObject({ attempts: 2, gaveUp: 'max-attempts' });
  });

  test('maxAttempts: 1 never retries', async () => {
    const { fetch, sent } = scriptedFetch(answer(503), answer(201));
    await createIdempotentFetch({ fetch, maxAttempts: 1 })(ORDERS, post());
    expect(sent).toHaveLength(1);
  });
});

describe('backoff, onRetry and the outcome', () => {
  test('exponential backoff with full jitter: a random wait up to min(maxDelayMs, base × 2^(n−1))', async () => {
    const events: RetryEvent[] = [];
    const { fetch } = scriptedFetch(answer(503), answer(503), answer(503), answer(503), answer(201));
    const idempotentFetch = createIdempotentFetch({
      fetch,
      baseDelayMs: 4,
      maxDelayMs: 10,
      random: () => 0.5,
      onRetry: (event) => events.push(event),
    });
    await idempotentFetch(ORDERS, post());
    expect(events.map((e) => e.delayMs)).toEqual([2, 4, 5, 5]);
    expect(events.map((e) => e.attempt)).toEqual([1, 2, 3, 4]);
    expect(events[0]).toMatchObject({ method: 'POST', url: ORDERS, reason: { kind: 'status', status: 503 } });
  });

  test('a random source outside [0, 1) cannot make a negative wait or one past the ceiling', async () => {
    const events: RetryEvent[] = [];
    for (const random of [() => -5, () => 7]) {
      const { fetch } = scriptedFetch(answer(503), answer(201));
      await createIdempotentFetch({ fetch, baseDelayMs: 3, random, onRetry: (e) => events.push(e) })(
        ORDERS,
        post(),
      );
    }
    expect(events.map((e) => e.delayMs)).toEqual([0, 3]);
  });

  test('onRetry sees the key and the network error; a throwing onRetry changes nothing', async () => {
    const events: RetryEvent[] = [];
    const error = networkError();
    const { fetch, sent } = scriptedFetch(error, answer(201));
    const response = await createIdempotentFetch({
      fetch,
      ...fast,
      onRetry: (event) => {
        events.push(event);
        throw new Error('listener bug');
      },
    })(ORDERS, post());
    expect(response.status).toBe(201);
    expect(events[0]?.key).toBe(sent[0]?.headers.get('idempotency-key'));
    expect(events[0]?.reason).toEqual({ kind: 'error', error });
  });

  test('isReplay and callOutcome say whether the final answer is a replay', async () => {
    const { fetch } = scriptedFetch(
      networkError(),
      answer(201, { id: 7 }, { 'idempotent-replayed': 'true' }),
    );
    const response = await createIdempotentFetch({ fetch, ...fast })(ORDERS, post());
    expect(isReplay(response)).toBe(true);
    expect(callOutcome(response)).toMatchObject({ replayed: true, attempts: 2, gaveUp: undefined });
    expect(isReplay(answer(201))).toBe(false);
    expect(callOutcome(answer(201))).toBeUndefined();
  });
});
