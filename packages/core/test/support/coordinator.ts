import {
  type BeginResult,
  type CapturedResponse,
  createIdempotency,
  type FinalizeParams,
  type IdempotencyEvent,
  type IdempotencyOptions,
  type IdempotentRequest,
  type LeasedExecution,
  type MaybePromise,
  type TransactionalExecution,
  type TransactionalStore,
} from '@idem/core';
import { afterEach, beforeEach, expect } from 'vitest';
import { createTestStore, manualClock } from './test-store.js';

export const KEY = '0190b7e2-5a5d-7c3e-8f00-1234567890ab';

/** A coordinator over a fresh test store with a manual clock and recorded events. */
export function setup(options: Partial<IdempotencyOptions> = {}) {
  const backend = createTestStore();
  const clock = manualClock();
  const events: IdempotencyEvent[] = [];
  const idem = createIdempotency({
    store: backend.store,
    clock,
    heartbeatIntervalMs: false,
    onEvent: (event) => events.push(event),
    ...options,
  });
  return { idem, backend, clock, events };
}

export function post(overrides: Partial<IdempotentRequest> = {}): IdempotentRequest {
  return {
    method: 'POST',
    route: '/v1/orders',
    body: { item: 'book', qty: 1 },
    key: KEY,
    ...overrides,
  };
}

export function created(body: unknown = { id: 1 }): CapturedResponse {
  return {
    status: 201,
    headers: {
      'Content-Type': 'application/json',
      Location: '/v1/orders/1',
      'Set-Cookie': 'sid=secret',
      'X-Other': 'x',
    },
    body: JSON.stringify(body),
  };
}

export function expectExecute(result: BeginResult): LeasedExecution {
  expect(result.action).toBe('execute');
  if (result.action !== 'execute') throw new Error('unreachable');
  return result.execution;
}

/** `begin` with `reserveIn: 'transaction'`: the execution the host reserves in its transaction. */
export function expectPending(result: BeginResult): TransactionalExecution {
  expect(result.action).toBe('reserve-in-transaction');
  if (result.action !== 'reserve-in-transaction') throw new Error('unreachable');
  return result.execution;
}

/**
 * The host's transaction as a store, for `finalizeWith`: `finalize` is what its transaction's finalize does
 * (write through to a store, fail, find another owner). A leased execution never reserves or releases
 * through it.
 */
export function inTransaction(
  finalize: (params: FinalizeParams) => MaybePromise<boolean>,
): TransactionalStore {
  const unexpected = () => {
    throw new Error('a leased execution only finalizes in the host’s transaction');
  };
  return { reserve: unexpected, finalize, release: unexpected };
}

export function expectReject(result: BeginResult, status: number, code: string) {
  expect(result.action).toBe('reject');
  if (result.action !== 'reject') throw new Error('unreachable');
  expect(result.error.status).toBe(status);
  expect(result.error.code).toBe(code);
  return result.error;
}

export function expectReplay(result: BeginResult) {
  expect(result.action).toBe('replay');
  if (result.action !== 'replay') throw new Error('unreachable');
  return result.response;
}

/** Fail each test of the file that leaves an unhandled rejection behind (a settle that threw unseen). */
export function failOnUnhandledRejections(): void {
  const unhandled: unknown[] = [];
  const onUnhandled = (reason: unknown) => unhandled.push(reason);
  beforeEach(() => {
    unhandled.length = 0;
    process.on('unhandledRejection', onUnhandled);
  });
  afterEach(async () => {
    await new Promise((r) => setTimeout(r, 5));
    process.off('unhandledRejection', onUnhandled);
    expect(unhandled).toEqual([]);
  });
}
