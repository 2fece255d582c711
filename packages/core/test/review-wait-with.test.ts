import {
  createIdempotency,
  IdemInProgressError,
  type IdempotencyEvent,
  type IdempotencyStore,
} from '@idem/core';
import { describe, expect, test } from 'vitest';
import {
  created,
  expectExecute,
  expectReject,
  expectReplay,
  failOnUnhandledRejections,
  post,
  setup,
} from './support/coordinator.js';
import { createTestStore, manualClock } from './support/test-store.js';

failOnUnhandledRejections();

const wait = { strategy: 'wait', maxWaitMs: 400, initialPollMs: 5, maxPollMs: 20 } as const;

describe('begin: a lock wait (IdemInProgressError) is reported as the design table says', () => {
  test('reject strategy: the conflict event says waited (design: `conflict (waited)`), as reserveWith does', async () => {
    const backend = createTestStore();
    const events: IdempotencyEvent[] = [];
    const store: IdempotencyStore = {
      ...backend.store,
      reserve: async () => {
        throw new IdemInProgressError('lock wait');
      },
    };
    const idem = createIdempotency({ store, heartbeatIntervalMs: false, onEvent: (e) => events.push(e) });
    expectReject(await idem.begin(post()), 409, 'IDEMPOTENCY_IN_PROGRESS');
    expect(events).toEqual([expect.objectContaining({ type: 'conflict', waited: true })]);
  });
});

describe('the wait strategy', () => {
  test('the other request releases: the waiter executes', async () => {
    const { idem } = setup({ inFlight: wait });
    const first = expectExecute(await idem.begin(post()));
    const waiting = idem.begin(post());
    setTimeout(() => void first.abort(), 20);
    const second = expectExecute(await waiting);
    expect(await second.finish(created())).toBe('finalized');
  });

  test('the other request finishes: the waiter replays', async () => {
    const { idem } = setup({ inFlight: wait });
    const first = expectExecute(await idem.begin(post()));
    const waiting = idem.begin(post());
    setTimeout(() => void first.finish(created()), 20);
    expect(expectReplay(await waiting).status).toBe(201);
  });

  test('the other lease lapses: the waiter takes over', async () => {
    const { idem, clock, events } = setup({ inFlight: wait, leaseMs: 1_000 });
    expectExecute(await idem.begin(post()));
    const waiting = idem.begin(post());
    setTimeout(() => clock.advance(2_000), 20);
    const second = expectExecute(await waiting);
    expect(second.tookOver).toBe(true);
    expect(events.filter((e) => e.type === 'reserved').at(-1)).toMatchObject({ tookOver: true });
  });

  test('the client leaves during the wait: answered at once, nothing reserved', async () => {
    const { idem, events } = setup({ inFlight: wait });
    expectExecute(await idem.begin(post()));
    const controller = new AbortController();
    const started = performance.now();
    const waiting = idem.begin(post({ signal: controller.signal }));
    setTimeout(() => controller.abort(), 20);
    expectReject(await waiting, 409, 'IDEMPOTENCY_IN_PROGRESS');
    expect(performance.now() - started).toBeLessThan(200);
    expect(events.at(-1)).toMatchObject({ type: 'conflict', waited: true });
  });

  test('the store fails during a poll (fail closed): 503, reported once', async () => {
    const { idem, backend, events } = setup({ inFlight: wait });
    expectExecute(await idem.begin(post()));
    const waiting = idem.begin(post());
    setTimeout(() => backend.inject('reserve', 'throw'), 15);
    expectReject(await waiting, 503, 'IDEMPOTENCY_STORE_UNAVAILABLE');
    expect(events.filter((e) => e.type === 'store-error')).toHaveLength(1);
  });

  test('a poll hangs past storeTimeoutMs, then reserves late: the late reservation is released', async () => {
    const { idem, backend } = setup({ inFlight: wait, storeTimeoutMs: 20 });
    const first = expectExecute(await idem.begin(post()));
    const waiting = idem.begin(post());
    setTimeout(() => {
      void first.abort();
      backend.inject('reserve', 'hang');
    }, 12);
    expectReject(await waiting, 503, 'IDEMPOTENCY_STORE_UNAVAILABLE');
    backend.inject('reserve', undefined);
    backend.resume();
    await new Promise((r) => setTimeout(r, 20));
    expect(backend.records.size).toBe(0);
  });
});

describe('idem.with(overrides)', () => {
  test('a derived storeTimeoutMs applies to the derived coordinator only', async () => {
    const backend = createTestStore();
    const base = createIdempotency({
      store: backend.store,
      storeTimeoutMs: 1_000,
      heartbeatIntervalMs: false,
    });
    const fast = base.with({ storeTimeoutMs: 15 });
    backend.inject('reserve', 'hang');
    const started = performance.now();
    expectReject(await fast.begin(post()), 503, 'IDEMPOTENCY_STORE_UNAVAILABLE');
    expect(performance.now() - started).toBeLessThan(500);
    const slow = Promise.resolve(base.begin(post({ key: '0190b7e2-5a5d-7c3e-8f00-1234567890ac' })));
    const raced = await Promise.race([
      slow.then(() => 'answered'),
      new Promise((r) => setTimeout(r, 100, 'pending')),
    ]);
    expect(raced).toBe('pending');
    backend.inject('reserve', undefined);
    backend.resume();
    await slow;
  });

  test('enabled: false on a derived coordinator turns it off, not the base', async () => {
    const { idem } = setup();
    const off = idem.with({ enabled: false });
    expect(off.covers('POST')).toBe(false);
    expect(await off.begin(post())).toEqual({ action: 'proceed', reason: 'disabled' });
    expect(idem.covers('POST')).toBe(true);
    expectExecute(await idem.begin(post()));
  });

  test('with().with() keeps the first override; siblings do not see each other', async () => {
    const { idem } = setup();
    const required = idem.with({ required: true });
    const chained = required.with({ methods: ['POST', 'PUT'] });
    expectReject(await chained.begin(post({ key: undefined })), 400, 'IDEMPOTENCY_KEY_MISSING');
    const sibling = idem.with({ methods: ['POST'] });
    expect(await sibling.begin(post({ key: undefined }))).toEqual({ action: 'proceed', reason: 'no-key' });
    expect(await idem.begin(post({ key: undefined }))).toEqual({ action: 'proceed', reason: 'no-key' });
  });

  test('an override given as undefined inherits the base value (a route config built from optional fields)', async () => {
    const backend = createTestStore();
    const base = createIdempotency({ store: backend.store, storeTimeoutMs: 15, heartbeatIntervalMs: false });
    const derived = base.with({ storeTimeoutMs: undefined, inFlight: undefined });
    backend.inject('reserve', 'hang');
    const started = performance.now();
    const answered = Promise.resolve(derived.begin(post()));
    const raced = await Promise.race([
      answered.then(() => 'answered'),
      new Promise((r) => setTimeout(r, 300, 'pending')),
    ]);
    backend.inject('reserve', undefined);
    backend.resume();
    await answered;
    // with the base's 15 ms deadline, a hung reserve is a 503 well within 300 ms
    expect(raced).toBe('answered');
    void started;
  });

  test('derived coordinators with heartbeats renew their own leases with their own leaseMs', async () => {
    const backend = createTestStore();
    const clock = manualClock();
    const base = createIdempotency({ store: backend.store, clock, heartbeatIntervalMs: 10, leaseMs: 1_000 });
    const long = base.with({ leaseMs: 100_000, heartbeatIntervalMs: 10 });
    const a = expectExecute(await base.begin(post()));
    const b = expectExecute(await long.begin(post({ key: '0190b7e2-5a5d-7c3e-8f00-1234567890ac' })));
    await new Promise((r) => setTimeout(r, 40));
    const leases = [...backend.records.values()]
      .map((r) => r.leaseUntilMs - clock.nowMs())
      .sort((x, y) => x - y);
    expect(leases).toEqual([1_000, 100_000]);
    await a.finish(created());
    await b.finish(created());
  });
});
