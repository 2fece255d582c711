import { ErrorCode } from '@idem/core';
import { describe, expect, test } from 'vitest';
import { created, expectExecute, expectReject, expectReplay, post, setup } from './support/coordinator.js';

describe('coordinator: a key held by a request in flight (design: The coordinator, in-flight strategies)', () => {
  test('strategy reject (default): 409 IDEMPOTENCY_IN_PROGRESS with Retry-After', async () => {
    const { idem, events } = setup({ retryAfterSeconds: 2 });
    expectExecute(await idem.begin(post()));
    const error = expectReject(await idem.begin(post()), 409, ErrorCode.InProgress);
    expect(error.headers).toEqual({ 'retry-after': '2' });
    expect(events.at(-1)).toMatchObject({ type: 'conflict', waited: false });
  });

  test('a lapsed lease is taken over by the retry (crash recovery), a live one is not', async () => {
    const { idem, clock } = setup({ leaseMs: 5_000 });
    expectExecute(await idem.begin(post()));
    clock.advance(4_999);
    expectReject(await idem.begin(post()), 409, ErrorCode.InProgress);
    clock.advance(1);
    expect(expectExecute(await idem.begin(post())).tookOver).toBe(true);
  });

  test('a lapsed lease with another fingerprint answers 422, it is not taken over', async () => {
    const { idem, clock } = setup({ leaseMs: 5_000 });
    expectExecute(await idem.begin(post()));
    clock.advance(6_000);
    expectReject(await idem.begin(post({ body: { other: 1 } })), 422, ErrorCode.KeyReused);
  });

  const wait = { strategy: 'wait', maxWaitMs: 2_000, initialPollMs: 5, maxPollMs: 20 } as const;

  test('strategy wait: the first request finishes while the second waits → the second replays', async () => {
    const { idem, events } = setup({ inFlight: wait });
    const first = expectExecute(await idem.begin(post()));
    const second = idem.begin(post());
    setTimeout(() => void first.finish(created()), 30);
    expect(expectReplay(await second).status).toBe(201);
    expect(events.map((e) => e.type)).toEqual(['reserved', 'finalized', 'replayed']);
  });

  test('strategy wait: the first request is released while the second waits → the second executes', async () => {
    const { idem } = setup({ inFlight: wait });
    const first = expectExecute(await idem.begin(post()));
    const second = idem.begin(post());
    setTimeout(() => void first.abort(), 30);
    expect(expectExecute(await second).tookOver).toBe(false);
  });

  test('strategy wait: the lease lapses while waiting → the second takes over', async () => {
    const { idem, clock } = setup({ inFlight: wait, leaseMs: 1_000 });
    expectExecute(await idem.begin(post()));
    const second = idem.begin(post());
    setTimeout(() => clock.advance(1_000), 30);
    expect(expectExecute(await second).tookOver).toBe(true);
  });

  test('strategy wait: nothing changes within maxWaitMs → 409 by default, with Retry-After', async () => {
    const { idem, backend, events } = setup({ inFlight: { ...wait, maxWaitMs: 60 } });
    expectExecute(await idem.begin(post()));
    const error = expectReject(await idem.begin(post()), 409, ErrorCode.InProgress);
    expect(error.headers['retry-after']).toBe('1');
    expect(events.at(-1)).toMatchObject({ type: 'conflict', waited: true });
    // 5 + 10 + 20 + 20 + 5 ms of polls, each one reserve call: bounded, not a busy loop.
    expect(backend.calls.filter((c) => c === 'reserve').length).toBeLessThanOrEqual(7);
  });

  test('strategy wait: the timeout status can be 503 (what Iceberg clients retry)', async () => {
    const { idem } = setup({ inFlight: { ...wait, maxWaitMs: 30, timeoutStatus: 503 } });
    expectExecute(await idem.begin(post()));
    expectReject(await idem.begin(post()), 503, ErrorCode.InProgress);
  });

  test('strategy wait: a client that goes away stops the wait', async () => {
    const { idem } = setup({ inFlight: { ...wait, maxWaitMs: 60_000 } });
    expectExecute(await idem.begin(post()));
    const controller = new AbortController();
    const second = idem.begin(post({ signal: controller.signal }));
    setTimeout(() => controller.abort(), 30);
    expectReject(await second, 409, ErrorCode.InProgress);
  });

  // design.md: the `wait` strategy polls "up to `maxWaitMs` …, then 409 or 503 with `Retry-After`"; the
  // request's `deadline` (IdempotencyOptions.deadline) ends the wait too, so that its answer comes in time.
  describe.each([
    ['before the first poll', { initialPollMs: 300, maxPollMs: 500 }, 60],
    ['after some polls', { initialPollMs: 5, maxPollMs: 20 }, 100],
  ])('strategy wait: the request’s deadline comes %s', (_, polls, deadlineMs) => {
    test.each([
      ['default', undefined, 409],
      ['503', 503, 503],
    ] as const)(
      'answered by the deadline, as a wait that ran out (timeout status %s)',
      async (_, timeoutStatus, status) => {
        const { idem, backend, events } = setup({
          inFlight: {
            strategy: 'wait',
            maxWaitMs: 10_000,
            ...polls,
            ...(timeoutStatus ? { timeoutStatus } : {}),
          },
          deadline: (request) => (request.host as { deadlineMs: number }).deadlineMs,
        });
        expectExecute(await idem.begin(post({ host: { deadlineMs: Number.POSITIVE_INFINITY } })));
        const started = performance.now();
        const waiting = idem.begin(post({ host: { deadlineMs: started + deadlineMs } }));
        const error = expectReject(await waiting, status, ErrorCode.InProgress);
        const tookMs = performance.now() - started;
        expect(tookMs).toBeGreaterThanOrEqual(deadlineMs - 2);
        expect(tookMs).toBeLessThan(deadlineMs + 80); // (slack for a loaded machine; the next poll is later)
        expect(error.headers['retry-after']).toBe('1');
        // Not a store that timed out: the key is in flight, and no poll was started that could only time out.
        expect(events.at(-1)).toMatchObject({ type: 'conflict', waited: true, status });
        expect(events.some((e) => e.type === 'store-error')).toBe(false);
        expect(backend.calls.filter((c) => c !== 'reserve')).toEqual([]);
      },
    );
  });

  test('strategy wait: a deadline after maxWaitMs leaves the wait its own bound', async () => {
    const { idem } = setup({
      inFlight: { ...wait, maxWaitMs: 40 },
      deadline: () => performance.now() + 60_000,
    });
    expectExecute(await idem.begin(post()));
    const started = performance.now();
    expectReject(await idem.begin(post()), 409, ErrorCode.InProgress);
    expect(performance.now() - started).toBeLessThan(1_000);
  });

  test('strategy wait: a mismatching request is still answered 422 at once', async () => {
    const { idem } = setup({ inFlight: wait });
    expectExecute(await idem.begin(post()));
    expectReject(await idem.begin(post({ body: 1 })), 422, ErrorCode.KeyReused);
  });

  test('20 concurrent requests with one key: exactly one executes, the rest get 409', async () => {
    const { idem } = setup();
    const results = await Promise.all(Array.from({ length: 20 }, () => idem.begin(post())));
    expect(results.filter((r) => r.action === 'execute')).toHaveLength(1);
    expect(results.filter((r) => r.action === 'reject')).toHaveLength(19);
  });

  test('20 concurrent requests with one key and wait: one executes, all others replay its answer', async () => {
    const { idem } = setup({ inFlight: wait });
    const results = Promise.all(
      Array.from({ length: 20 }, async () => {
        const result = await idem.begin(post());
        if (result.action === 'execute') {
          await new Promise((resolve) => setTimeout(resolve, 20));
          await result.execution.finish(created());
        }
        return result.action;
      }),
    );
    const actions = await results;
    expect(actions.filter((a) => a === 'execute')).toHaveLength(1);
    expect(actions.filter((a) => a === 'replay')).toHaveLength(19);
  });
});
