import {
  type BeginResult,
  type CapturedResponse,
  createIdempotency,
  type Execution,
  type IdempotencyEvent,
  type IdempotencyOptions,
  type IdempotentRequest,
} from '@idem/core';
import { expect } from 'vitest';
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

export function expectExecute(result: BeginResult): Execution {
  expect(result.action).toBe('execute');
  if (result.action !== 'execute') throw new Error('unreachable');
  return result.execution;
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
