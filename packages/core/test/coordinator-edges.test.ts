import { ErrorCode, type IdempotencyStore } from '@idem/core';
import { describe, expect, test } from 'vitest';
import { created, expectExecute, expectReject, expectReplay, post, setup } from './support/coordinator.js';

const boom = () => {
  throw new Error('hook failure');
};

describe('coordinator: host hooks that throw never reach the request (design §4)', () => {
  test('a throwing finalization rule: finish does not throw, the default rule decides, an event says so', async () => {
    const { idem, backend, events } = setup({ finalizationRule: boom });
    const execution = expectExecute(await idem.begin(post()));
    await expect(execution.finish(created())).resolves.toBe('finalized');
    expect(backend.only()?.response?.status).toBe(201);
    expect(events).toContainEqual(expect.objectContaining({ type: 'hook-error', hook: 'finalizationRule' }));
    const failing = setup({ finalizationRule: boom });
    const other = expectExecute(await failing.idem.begin(post()));
    await expect(other.finish({ status: 500, headers: {}, body: 'x' })).resolves.toBe('released');
  });

  test('a redact that returns nothing (edited in place, forgot to return): the status alone is stored, not released', async () => {
    const { idem, backend, events } = setup({ redact: (() => undefined) as never });
    const execution = expectExecute(await idem.begin(post()));
    await expect(execution.finish(created())).resolves.toBe('finalized');
    expect(backend.only()?.response).toEqual({ status: 201, headers: {}, body: null, bodyOmitted: true });
    expect(events).toContainEqual(expect.objectContaining({ type: 'hook-error', hook: 'redact' }));
  });

  test('a throwing redact: the status alone is stored (no headers, body omitted), never the unredacted body', async () => {
    const { idem, backend, events } = setup({ redact: boom });
    const execution = expectExecute(await idem.begin(post()));
    await expect(execution.finish(created())).resolves.toBe('finalized');
    expect(backend.only()?.response).toEqual({ status: 201, headers: {}, body: null, bodyOmitted: true });
    expect(events).toContainEqual(expect.objectContaining({ type: 'hook-error', hook: 'redact' }));
    const replay = expectReplay(await idem.begin(post()));
    expect(replay.status).toBe(201);
    expect(replay.headers['idempotent-replay-body-omitted']).toBe('true');
  });

  test('prepare() for a transactional finalize never throws either', async () => {
    const { idem } = setup({ redact: boom, finalizationRule: boom });
    const execution = expectExecute(await idem.begin(post()));
    expect(execution.prepare(created())).toEqual({ status: 201, headers: {}, body: null, bodyOmitted: true });
  });

  test('a throwing rebuildReplay: the stored answer is replayed', async () => {
    const { idem, events } = setup({ rebuildReplay: () => Promise.reject(new Error('no view')) });
    await expectExecute(await idem.begin(post())).finish(created());
    const replay = expectReplay(await idem.begin(post()));
    expect(Buffer.from(replay.body ?? []).toString()).toBe('{"id":1}');
    expect(events).toContainEqual(expect.objectContaining({ type: 'hook-error', hook: 'rebuildReplay' }));
  });

  test('a throwing event listener changes nothing', async () => {
    const { idem } = setup({ onEvent: boom });
    await expectExecute(await idem.begin(post())).finish(created());
    expectReplay(await idem.begin(post()));
  });
});

describe('coordinator: values the store cannot hold are the request’s problem, not an outage', () => {
  test('at reserve: 400 IDEMPOTENCY_STORE_LIMIT without Retry-After, no store-error event, even with fail-open', async () => {
    for (const failMode of ['closed', 'open'] as const) {
      const { idem, backend, events } = setup({ failMode });
      backend.inject('reserve', 'limit');
      const error = expectReject(await idem.begin(post()), 400, ErrorCode.StoreLimit);
      expect(error.headers).toEqual({});
      expect(events.map((e) => e.type)).toEqual(['store-limit']);
    }
  });

  test('the status of that answer is an option', async () => {
    const { idem, backend } = setup({ statuses: { storeLimit: 422 } });
    backend.inject('reserve', 'limit');
    expectReject(await idem.begin(post()), 422, ErrorCode.StoreLimit);
  });

  test('at finalize: the key is released (the retry executes), never left blocked for its lease', async () => {
    const { idem, backend, events } = setup();
    const execution = expectExecute(await idem.begin(post()));
    backend.inject('finalize', 'limit');
    expect(await execution.finish(created())).toBe('released');
    expect(backend.records.size).toBe(0);
    expect(events.at(-1)).toMatchObject({ type: 'released', reason: 'unstorable', status: 201 });
    backend.inject('finalize', undefined);
    expectExecute(await idem.begin(post()));
  });

  test('a store that declares a smaller body limit lowers the coordinator’s cap', async () => {
    const { idem, backend } = setup();
    const limited = setup({
      store: { ...backend.store, limits: { maxBodyBytes: 4 } } satisfies IdempotencyStore,
    });
    const execution = expectExecute(await limited.idem.begin(post()));
    expect(execution.maxBodyBytes).toBe(4);
    await execution.finish(created());
    expect(backend.only()?.response).toMatchObject({ body: null, bodyOmitted: true });
    expect(
      expectExecute(await idem.begin(post({ key: '0190b7e2-5a5d-7c3e-8f00-1234567890ac' }))).maxBodyBytes,
    ).toBe(1024 * 1024);
  });
});

describe('coordinator: release and the lease', () => {
  test('a release the store refuses (another owner took the key) reports lease-lost, not released', async () => {
    const { idem, backend, events, clock } = setup({ leaseMs: 1_000 });
    const stale = expectExecute(await idem.begin(post()));
    clock.advance(1_000);
    expectExecute(await idem.begin(post())); // takes the lapsed lease over
    expect(await stale.finish({ status: 500, headers: {}, body: null })).toBe('lease-lost');
    expect(events.at(-1)).toMatchObject({ type: 'lease-lost', phase: 'release' });
    expect(backend.only()?.response).toBeNull();
  });

  test('a waiting request stops waiting as soon as its client leaves', async () => {
    const { idem } = setup({ inFlight: { strategy: 'wait', maxWaitMs: 5_000, initialPollMs: 1_000 } });
    expectExecute(await idem.begin(post()));
    const controller = new AbortController();
    const started = performance.now();
    const waiting = idem.begin(post({ signal: controller.signal }));
    setTimeout(() => controller.abort(), 20);
    expectReject(await waiting, 409, ErrorCode.InProgress);
    expect(performance.now() - started).toBeLessThan(500);
  });

  test('maxExecutionMs: the lease of a handler that never answers is renewed no longer, so its key frees', async () => {
    const { idem, backend } = setup({ heartbeatIntervalMs: 20, leaseMs: 60, maxExecutionMs: 70 });
    const execution = expectExecute(await idem.begin(post()));
    await new Promise((resolve) => setTimeout(resolve, 60));
    const renewals = backend.calls.filter((c) => c === 'renewLease').length;
    expect(renewals).toBeGreaterThan(0);
    await new Promise((resolve) => setTimeout(resolve, 100));
    const later = backend.calls.filter((c) => c === 'renewLease').length;
    await new Promise((resolve) => setTimeout(resolve, 60));
    expect(backend.calls.filter((c) => c === 'renewLease').length).toBe(later);
    // Its answer, when it comes and nobody took the key over, is still stored.
    expect(await execution.finish(created())).toBe('finalized');
  });

  test('without maxExecutionMs the lease is renewed for as long as the handler runs', async () => {
    const { idem, backend } = setup({ heartbeatIntervalMs: 20, leaseMs: 60 });
    const execution = expectExecute(await idem.begin(post()));
    await new Promise((resolve) => setTimeout(resolve, 100));
    const renewals = backend.calls.filter((c) => c === 'renewLease').length;
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(backend.calls.filter((c) => c === 'renewLease').length).toBeGreaterThan(renewals);
    await execution.finish(created());
  });
});
