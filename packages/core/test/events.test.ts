import { hasListeners, type IdempotencyEvent, safeListener, startPurgeScheduler } from '@idem/core';
import { describe, expect, test } from 'vitest';
import { created, expectExecute, post, setup } from './support/coordinator.js';
import { createTestStore } from './support/test-store.js';

const OTHER_KEY = '0190b7e2-5a5d-7c3e-8f00-000000000001';

describe('events: any number of listeners, each isolated', () => {
  test('every listener receives every event, in order, whatever another one does', async () => {
    const first: string[] = [];
    const last: string[] = [];
    const { idem } = setup({
      onEvent: [
        (event) => first.push(event.type),
        () => {
          throw new Error('a broken metrics hook');
        },
        async () => {
          throw new Error('an async listener that rejects');
        },
        (event) => last.push(event.type),
      ],
    });
    const execution = expectExecute(await idem.begin(post()));
    await execution.finish(created());
    expect((await idem.begin(post())).action).toBe('replay');
    expect(first).toEqual(['reserved', 'finalized', 'replayed']);
    expect(last).toEqual(first);
  });

  test('a rejecting async listener is never an unhandled rejection', async () => {
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      const emit = safeListener(async () => {
        throw new Error('rejected');
      });
      emit({ type: 'purged', count: 0, batches: 1, durationMs: 1 });
      await new Promise((resolve) => setTimeout(resolve, 20));
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });

  test('no listener (none, an empty list): hasListeners is false, and the coordinator works as before', async () => {
    expect(hasListeners(safeListener(undefined))).toBe(false);
    expect(hasListeners(safeListener([]))).toBe(false);
    expect(hasListeners(safeListener([() => {}]))).toBe(true);
    const { idem } = setup({ onEvent: [] });
    const execution = expectExecute(await idem.begin(post()));
    expect(await execution.finish(created())).toBe('finalized');
    expect((await idem.begin(post())).action).toBe('replay');
  });

  test('a later change to the array a host passed does not change who listens', async () => {
    const seen: string[] = [];
    const listeners = [(event: IdempotencyEvent) => seen.push(event.type)];
    const { idem } = setup({ onEvent: listeners });
    listeners.length = 0;
    await expectExecute(await idem.begin(post())).abort();
    expect(seen).toEqual(['reserved', 'released']);
  });

  test('the purge scheduler takes several listeners too', async () => {
    const a: string[] = [];
    const b: string[] = [];
    const stop = startPurgeScheduler({
      store: createTestStore().store,
      intervalMs: 5,
      jitter: 0,
      onEvent: [(event) => a.push(event.type), (event) => b.push(event.type)],
    });
    await new Promise((resolve) => setTimeout(resolve, 30));
    await stop();
    expect(a[0]).toBe('purged');
    expect(b).toEqual(a);
  });
});

describe('events: what they carry (labels for metrics and traces, never bodies or paths)', () => {
  const SECRET_BODY = { card: '4111-1111-1111-1111' };
  const request = post({
    route: '/v1/orders/:id',
    path: '/v1/orders/42',
    body: SECRET_BODY,
    scope: 'tenant',
  });

  test('key events carry method, route template, scope and key; decisions their elapsed time', async () => {
    const { idem, events } = setup();
    const execution = expectExecute(await idem.begin(request));
    await execution.finish(created());
    await idem.begin(request);
    await idem.begin({ ...request, body: { other: true } });
    for (const event of events) {
      expect(event).toMatchObject({ method: 'POST', route: '/v1/orders/:id', scope: 'tenant' });
      expect(JSON.stringify(event)).not.toMatch(/4111|\/v1\/orders\/42/);
    }
    const [reserved, finalized, replayed, mismatch] = events;
    expect(reserved).toMatchObject({ type: 'reserved', tookOver: false, owner: execution.owner });
    expect(finalized).toMatchObject({ type: 'finalized', status: 201, owner: execution.owner });
    expect(replayed).toMatchObject({ type: 'replayed', status: 201 });
    expect(mismatch).toMatchObject({ type: 'mismatch', status: 422 });
    for (const decision of [reserved, replayed, mismatch]) {
      const { elapsedMs, durationMs } = decision as { elapsedMs: number; durationMs: number };
      expect(elapsedMs).toBeGreaterThanOrEqual(durationMs);
    }
    expect((finalized as { executionMs: number }).executionMs).toBeGreaterThanOrEqual(0);
  });

  test('a conflict carries the status of the answer it caused (409, or the wait timeout status)', async () => {
    const { idem, events } = setup();
    expectExecute(await idem.begin(post()));
    await idem.begin(post());
    expect(events.at(-1)).toMatchObject({
      type: 'conflict',
      status: 409,
      waited: false,
      route: '/v1/orders',
    });
    const waiting = setup({
      inFlight: { strategy: 'wait', maxWaitMs: 20, initialPollMs: 5, timeoutStatus: 503 },
    });
    expectExecute(await waiting.idem.begin(post()));
    await waiting.idem.begin(post());
    expect(waiting.events.at(-1)).toMatchObject({ type: 'conflict', status: 503, waited: true });
  });

  test('every way an execution ends names its owner, so a listener can pair it with its reservation', async () => {
    const { idem, backend, events } = setup();
    const released = expectExecute(await idem.begin(post()));
    await released.finish({ status: 500, headers: {}, body: 'boom' });
    expect(events.at(-1)).toMatchObject({
      type: 'released',
      reason: 'status',
      status: 500,
      owner: released.owner,
    });

    const failed = expectExecute(await idem.begin(post({ key: OTHER_KEY })));
    backend.inject('finalize', 'throw');
    await failed.finish(created());
    expect(events.at(-1)).toMatchObject({
      type: 'store-error',
      operation: 'finalize',
      owner: failed.owner,
      method: 'POST',
      route: '/v1/orders',
    });
  });

  test('a reserve that fails names the request and its answer (503), and no owner (nothing was reserved)', async () => {
    const { idem, backend, events } = setup();
    backend.inject('reserve', 'throw');
    await idem.begin(post());
    expect(events).toMatchObject([
      { type: 'store-error', operation: 'reserve', method: 'POST', route: '/v1/orders', status: 503 },
    ]);
    expect((events[0] as { owner?: string }).owner).toBeUndefined();
    const open = setup({ failMode: 'open' });
    open.backend.inject('reserve', 'throw');
    await open.idem.begin(post());
    expect(open.events[0]).toMatchObject({ type: 'store-error', failedOpen: true });
    expect((open.events[0] as { status?: number }).status).toBeUndefined();
  });
});
