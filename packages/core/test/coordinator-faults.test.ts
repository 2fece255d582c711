import { createIdempotency, ErrorCode, isIdemError, type MaybePromise } from '@idem/core';
import { v7 } from 'uuid';
import { describe, expect, test } from 'vitest';
import { created, expectExecute, expectReject, post, setup } from './support/coordinator.js';

describe('coordinator: store faults and leases (design: The coordinator, the heartbeat)', () => {
  test('a store that throws: fail closed with 503 IDEMPOTENCY_STORE_UNAVAILABLE and Retry-After', async () => {
    const { idem, backend, events } = setup({ retryAfterSeconds: 3 });
    backend.inject('reserve', 'throw');
    const error = expectReject(await idem.begin(post()), 503, ErrorCode.StoreUnavailable);
    expect(error.headers).toEqual({ 'retry-after': '3' });
    expect((error.cause as Error).message).toBe('injected reserve failure');
    expect(events).toMatchObject([{ type: 'store-error', operation: 'reserve', failedOpen: false }]);
  });

  test('a store that hangs: 503 within storeTimeoutMs, not a hung request', async () => {
    const { idem, backend } = setup({ storeTimeoutMs: 50 });
    backend.inject('reserve', 'hang');
    const startedMs = performance.now();
    const error = expectReject(await idem.begin(post()), 503, ErrorCode.StoreUnavailable);
    expect(performance.now() - startedMs).toBeLessThan(2_000);
    expect((error.cause as Error).message).toMatch(/did not answer within 50 ms/);
    backend.resume();
  });

  test('store calls share one deadline timer: each hung call times out on its own, answered ones are untouched', async () => {
    const { idem, backend } = setup({ storeTimeoutMs: 40 });
    backend.inject('reserve', 'hang');
    const first = idem.begin(post({ key: v7() }));
    await new Promise((resolve) => setTimeout(resolve, 15));
    const second = idem.begin(post({ key: v7() })); // started later: its deadline is later
    backend.inject('reserve', undefined);
    const answered = idem.begin(post({ key: v7() })); // answers at once, between two hung calls
    expectExecute(await answered);
    expectReject(await first, 503, ErrorCode.StoreUnavailable);
    expectReject(await second, 503, ErrorCode.StoreUnavailable);
    backend.resume();
    // After the queue drained, a new hung call still times out (the timer is armed again).
    backend.inject('reserve', 'hang');
    expectReject(await idem.begin(post({ key: v7() })), 503, ErrorCode.StoreUnavailable);
    backend.resume();
  });

  test('a store that answers with lazy thenables (query builders) runs each call once', async () => {
    const { backend } = setup();
    const runs: string[] = [];
    // Each `then` runs the operation again, as a query builder awaited twice would.
    const lazy =
      <A extends unknown[], R>(name: string, method: (...args: A) => MaybePromise<R>) =>
      (...args: A) =>
        ({
          // biome-ignore lint/suspicious/noThenProperty: a thenable on purpose
          then: (resolve: (value: R) => unknown, reject: (error: unknown) => unknown) => {
            runs.push(name);
            return Promise.resolve(method(...args)).then(resolve, reject);
          },
        }) as unknown as Promise<R>;
    const store = {
      ...backend.store,
      reserve: lazy('reserve', backend.store.reserve.bind(backend.store)),
      finalize: lazy('finalize', backend.store.finalize.bind(backend.store)),
    };
    const idem = createIdempotency({ store, heartbeatIntervalMs: false });
    const execution = expectExecute(await idem.begin(post({ key: v7() })));
    await execution.finish(created());
    expect(runs).toEqual(['reserve', 'finalize']);
  });

  test('a reservation that lands after the timeout is released, so the key is not blocked for a lease', async () => {
    const { idem, backend } = setup({ storeTimeoutMs: 20 });
    backend.inject('reserve', 'hang');
    expectReject(await idem.begin(post()), 503, ErrorCode.StoreUnavailable);
    backend.inject('reserve', undefined);
    backend.resume();
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(backend.records.size).toBe(0);
    expect(backend.calls).toEqual(['reserve', 'release']);
  });

  test('fail open (opt-in): the request proceeds without a record, and an event says so', async () => {
    const { idem, backend, events } = setup({ failMode: 'open' });
    backend.inject('reserve', 'throw');
    expect(await idem.begin(post())).toEqual({ action: 'proceed', reason: 'fail-open' });
    expect(events).toMatchObject([{ type: 'store-error', operation: 'reserve', failedOpen: true }]);
  });

  test('a store failure during a wait is a 503 too', async () => {
    const { idem, backend } = setup({ inFlight: { strategy: 'wait', maxWaitMs: 1_000, initialPollMs: 5 } });
    expectExecute(await idem.begin(post()));
    const second = idem.begin(post());
    setTimeout(() => backend.inject('reserve', 'throw'), 2);
    expectReject(await second, 503, ErrorCode.StoreUnavailable);
  });

  test('finalize or release failing never throws: the response still goes out, the outcome says store-error', async () => {
    const { idem, backend, events } = setup();
    const execution = expectExecute(await idem.begin(post()));
    backend.inject('finalize', 'throw');
    expect(await execution.finish(created())).toBe('store-error');
    const other = expectExecute(await idem.begin(post({ key: '0190b7e2-5a5d-7c3e-8f00-000000000001' })));
    backend.inject('release', 'throw');
    await expect(other.abort()).resolves.toBeUndefined();
    expect(
      events.filter((e) => e.type === 'store-error').map((e) => e.type === 'store-error' && e.operation),
    ).toEqual(['finalize', 'release']);
  });

  test('a listener that throws does not break the request', async () => {
    const { idem } = setup({
      onEvent: () => {
        throw new Error('metrics down');
      },
    });
    expectExecute(await idem.begin(post()));
  });

  test('heartbeat: the lease is renewed while the handler runs, so a retry cannot take over', async () => {
    const { idem, backend, clock } = setup({ leaseMs: 1_000, heartbeatIntervalMs: 10 });
    const execution = expectExecute(await idem.begin(post()));
    const firstLease = backend.only()?.leaseUntilMs as number;
    clock.advance(900);
    await new Promise((resolve) => setTimeout(resolve, 40));
    expect(backend.only()?.leaseUntilMs).toBeGreaterThan(firstLease);
    clock.advance(200);
    expectReject(await idem.begin(post()), 409, ErrorCode.InProgress);
    expect(await execution.finish(created())).toBe('finalized');
    const renewals = backend.calls.filter((c) => c === 'renewLease').length;
    await new Promise((resolve) => setTimeout(resolve, 40));
    expect(backend.calls.filter((c) => c === 'renewLease').length).toBe(renewals);
  });

  test('heartbeat: a lost reservation aborts the execution signal and emits lease-lost', async () => {
    const { idem, backend, events } = setup({ heartbeatIntervalMs: 10 });
    const execution = expectExecute(await idem.begin(post()));
    backend.records.clear();
    await new Promise((resolve) => setTimeout(resolve, 40));
    expect(execution.signal.aborted).toBe(true);
    expect(events.find((e) => e.type === 'lease-lost')).toMatchObject({ phase: 'heartbeat' });
  });

  test('errors carry a stable code, a status, a cause and survive a second copy of the package', async () => {
    const { idem, backend } = setup();
    backend.inject('reserve', 'throw');
    const result = await idem.begin(post());
    const error = result.action === 'reject' ? result.error : undefined;
    expect(isIdemError(error)).toBe(true);
    expect(isIdemError(new Error('x'))).toBe(false);
    expect(isIdemError({ code: ErrorCode.StoreUnavailable })).toBe(false);
    const foreign = Object.assign(new Error('copy'), { [Symbol.for('@idem/core/error')]: true });
    expect(isIdemError(foreign)).toBe(true);
  });
});
