import type { IdempotencyEvent, TransactionalStore } from '@idem/core';
import { describe, expect, test } from 'vitest';
import {
  created,
  expectExecute,
  failOnUnhandledRejections,
  inTransaction,
  post,
  setup,
} from './support/coordinator.js';

failOnUnhandledRejections();

const tick = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A leased execution whose lease another request took over, found by the heartbeat. */
async function lost() {
  const s = setup({ heartbeatIntervalMs: 10, leaseMs: 1_000 });
  const execution = expectExecute(await s.idem.begin(post()));
  s.clock.advance(2_000); // the lease lapsed
  const other = expectExecute(await s.idem.begin(post()));
  expect(other.tookOver).toBe(true);
  for (let i = 0; i < 20 && execution.state !== 'lost'; i++) await tick(10);
  expect(execution.state).toBe('lost');
  expect(execution.signal.aborted).toBe(true);
  return { ...s, execution, other };
}

const types = (events: IdempotencyEvent[]) =>
  events.map((e) => `${e.type}${'phase' in e ? `:${e.phase}` : ''}`);

describe('after the heartbeat lost the lease', () => {
  test('abort: lease-lost (release), the other owner keeps the key', async () => {
    const { execution, events, backend, other } = await lost();
    await execution.abort();
    expect(types(events).slice(-1)).toEqual(['lease-lost:release']);
    expect(backend.only()?.owner).toBe(other.owner);
  });

  test('finish with a stored status: lease-lost (finalize), nothing overwritten', async () => {
    const { execution, events, backend, other } = await lost();
    expect(await execution.finish(created())).toBe('lease-lost');
    expect(types(events).slice(-1)).toEqual(['lease-lost:finalize']);
    expect(backend.only()?.owner).toBe(other.owner);
  });

  test('finalizeWith: lease-lost, then finish is already-settled', async () => {
    const { execution, backend } = await lost();
    const tx = inTransaction((p) => backend.store.finalize(p));
    expect(await execution.finalizeWith(created(), tx)).toBe('lease-lost');
    expect(await execution.finish(created())).toBe('already-settled');
    await execution.abort();
  });

  test('finish ∥ abort ∥ finalizeWith after lost: nothing throws', async () => {
    const { execution, backend } = await lost();
    const tx = inTransaction((p) => backend.store.finalize(p));
    const all = await Promise.allSettled([
      execution.finish(created()),
      execution.abort(),
      execution.finalizeWith(created(), tx),
    ]);
    expect(all.map((r) => r.status)).toEqual(['fulfilled', 'fulfilled', 'fulfilled']);
  });
});

describe('a renewal in flight while the execution settles', () => {
  test('renewLease hangs; finish settles; the renewal then answers false: no lease-lost, no throw', async () => {
    const s = setup({ heartbeatIntervalMs: 10, leaseMs: 1_000, storeTimeoutMs: 1_000 });
    const execution = expectExecute(await s.idem.begin(post()));
    let answer: (v: boolean) => void = () => {};
    s.backend.store.renewLease = () => new Promise<boolean>((r) => (answer = r));
    await tick(30); // a beat started
    expect(await execution.finish(created())).toBe('finalized');
    answer(false);
    await tick(5);
    expect(types(s.events)).toEqual(['reserved', 'finalized']);
  });

  test('renewLease hangs; finalizeWith writes; the renewal then answers false: the write commits as usual', async () => {
    const s = setup({ heartbeatIntervalMs: 10, leaseMs: 1_000, storeTimeoutMs: 1_000 });
    const execution = expectExecute(await s.idem.begin(post()));
    let answer: (v: boolean) => void = () => {};
    s.backend.store.renewLease = () => new Promise<boolean>((r) => (answer = r));
    await tick(30);
    const tx: TransactionalStore = inTransaction((p) => s.backend.store.finalize(p));
    expect(await execution.finalizeWith(created(), tx)).toBe('finalized');
    answer(false);
    await tick(5);
    expect(await execution.finish(created())).toBe('finalized');
    expect(types(s.events)).toEqual(['reserved', 'finalized']);
  });

  test('renewLease answers false during a pending finalizeWith (state written): no lifecycle error', async () => {
    const s = setup({ heartbeatIntervalMs: 10, leaseMs: 1_000, storeTimeoutMs: 1_000 });
    const execution = expectExecute(await s.idem.begin(post()));
    let answer: (v: boolean) => void = () => {};
    s.backend.store.renewLease = () => new Promise<boolean>((r) => (answer = r));
    await tick(30);
    let finalize: (v: boolean) => void = () => {};
    const writing = execution.finalizeWith(
      created(),
      inTransaction(() => new Promise<boolean>((r) => (finalize = r))),
    );
    answer(false);
    await tick(5);
    finalize(true);
    expect(await writing).toBe('finalized');
    expect(await execution.finish(created())).toBe('finalized');
  });

  test('maxExecutionMs: the heartbeat stops renewing, the late answer is still stored', async () => {
    const s = setup({ heartbeatIntervalMs: 10, leaseMs: 1_000, maxExecutionMs: 25 });
    const execution = expectExecute(await s.idem.begin(post()));
    await tick(60);
    const lease = s.backend.only()?.leaseUntilMs;
    await tick(40);
    expect(s.backend.only()?.leaseUntilMs).toBe(lease);
    expect(await execution.finish(created())).toBe('finalized');
  });
});
