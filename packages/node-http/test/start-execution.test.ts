import type { IdempotencyStore } from '@idem/core';
import { createIdempotency } from '@idem/core';
import { describeRequest, startExecution, writeResponse } from '@idem/node-http';
import { createMemoryStore } from '@idem/store-memory';
import { afterEach, describe, expect, test } from 'vitest';
import { deferred, fakeExecution, listen, newKey, next, send, sendAndLeave } from './support.js';

let close: (() => Promise<void>) | undefined;
afterEach(async () => {
  await close?.();
  close = undefined;
});

/**
 * A server whose every request goes through a coordinator over `store`, then startExecution; `runs()` counts
 * the handler's runs, `closed` is the last response's close.
 */
async function server(store: IdempotencyStore) {
  const idem = createIdempotency({ store, keyFormat: 'token' });
  const outcomes: (boolean | string)[] = [];
  let runs = 0;
  const state = { closed: Promise.resolve() as Promise<unknown> };
  const { port, close: stop } = await listen(async (req, res) => {
    state.closed = next(res, 'close');
    const parts = {
      method: 'POST',
      url: '/',
      headers: req.headers,
      route: '/',
      body: 'x',
      scope: '',
      host: req,
    };
    const result = await idem.begin(describeRequest(idem, res, parts));
    if (result.action !== 'execute') {
      outcomes.push(result.action);
      return result.action === 'replay' ? writeResponse(res, result.response) : res.end(result.action);
    }
    const run = await startExecution(result.execution, res);
    outcomes.push(run);
    if (!run) return;
    runs++;
    res.statusCode = 201;
    res.end('created');
  });
  close = stop;
  return { port, outcomes, runs: () => runs, state };
}

describe('startExecution', () => {
  test('a client still there: true, and the answer settles the key (the retry is a replay)', async () => {
    const store = createMemoryStore();
    const { port, outcomes, runs } = await server(store);
    const key = newKey();
    expect(await send(port, { headers: { 'idempotency-key': key } })).toMatchObject({ status: 201 });
    expect(await send(port, { headers: { 'idempotency-key': key } })).toMatchObject({
      status: 201,
      headers: { 'idempotent-replayed': 'true' },
      body: 'created',
    });
    expect(outcomes).toEqual([true, 'replay']);
    expect(runs()).toBe(1);
    await store.close();
  });

  test('a client that leaves while the key is being reserved: abort, nothing runs, the key is free', async () => {
    const memory = createMemoryStore();
    const reserving = deferred();
    let reserves = 0;
    const store: IdempotencyStore = {
      ...memory,
      async reserve(params) {
        if (reserves++ === 0) {
          reserving.resolve();
          await state.closed; // the first request's: the server has seen its client leave
        }
        return memory.reserve(params);
      },
    };
    const { port, outcomes, runs, state } = await server(store);
    const key = newKey();
    // The client leaves as soon as the reservation has started; the reservation completes after that.
    sendAndLeave(port, reserving.promise, { 'idempotency-key': key });
    for (let waitedMs = 0; outcomes.length === 0 && waitedMs < 2_000; waitedMs += 10) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    expect(outcomes).toEqual([false]);
    expect(runs()).toBe(0);
    expect(await memory.load({ scope: '', key })).toBeUndefined();
    // The key was released: a retry runs the handler.
    expect(await send(port, { headers: { 'idempotency-key': key } })).toMatchObject({ status: 201 });
    expect(runs()).toBe(1);
    await memory.close();
  });

  test('a response already gone: abort once, finish never', async () => {
    const fake = fakeExecution();
    const arrived = deferred();
    const ran = deferred<boolean>();
    const { port, close: stop } = await listen(async (_req, res) => {
      arrived.resolve();
      await next(res, 'close');
      ran.resolve(await startExecution(fake.execution, res));
    });
    close = stop;
    sendAndLeave(port, arrived.promise);
    expect(await ran.promise).toBe(false);
    expect(await fake.settled).toBe('abort');
    expect(fake.aborts).toBe(1);
    expect(fake.finished).toEqual([]);
  });
});
