import {
  createIdempotency,
  ErrorCode,
  type IdempotencyEvent,
  type IdempotencyStore,
  IdemStoreLimitError,
  type MaybePromise,
} from '@idem/core';
import { createMemoryStore, withReplayCache } from '@idem/store-memory';
import { v7 } from 'uuid';
import { describe, expect, test } from 'vitest';

// How a wrapped store answers one method: the memory store's own synchronous value, a promise of it, a lazy
// thenable, a synchronous throw (a fault, or a limit), a rejected promise, or a promise that never settles.
type Mode = 'value' | 'promise' | 'thenable' | 'throw' | 'limit' | 'reject' | 'hang';
type Method = 'reserve' | 'load' | 'finalize' | 'release' | 'renewLease';

function storeAnswering(modes: Partial<Record<Method, Mode>>) {
  const inner = createMemoryStore({ sweepIntervalMs: false });
  const runs: Method[] = [];
  const answer =
    <A, R>(method: Method, call: (a: A) => MaybePromise<R>) =>
    (a: A): MaybePromise<R> => {
      const mode = modes[method] ?? 'value';
      if (mode === 'throw') throw new Error(`${method} failed`);
      if (mode === 'limit') throw new IdemStoreLimitError(`${method} cannot hold it`);
      if (mode === 'reject') return Promise.reject(new Error(`${method} failed`));
      if (mode === 'hang') return new Promise<R>(() => {});
      if (mode === 'promise') return Promise.resolve().then(() => call(a));
      if (mode === 'thenable') {
        return {
          // biome-ignore lint/suspicious/noThenProperty: a thenable on purpose
          then: (resolve, reject) => {
            runs.push(method);
            return Promise.resolve(call(a)).then(resolve, reject);
          },
        } as PromiseLike<R>;
      }
      return call(a);
    };
  const store: IdempotencyStore = {
    reserve: answer('reserve', (p) => inner.reserve(p)),
    load: answer('load', (p) => inner.load(p)),
    finalize: answer('finalize', (p) => inner.finalize(p)),
    release: answer('release', (p) => inner.release(p)),
    renewLease: answer('renewLease', (p) => inner.renewLease(p)),
    purgeExpired: (p) => inner.purgeExpired(p),
  };
  return { store, inner, runs };
}

const request = (key = v7()) => ({ method: 'POST', route: '/orders', body: { item: 'book' }, key });
const created = { status: 201, headers: { 'content-type': 'application/json' }, body: '{"id":1}' };

function coordinator(store: IdempotencyStore, storeTimeoutMs = 2_000) {
  const events: IdempotencyEvent[] = [];
  const idem = createIdempotency({
    store,
    storeTimeoutMs,
    heartbeatIntervalMs: false,
    onEvent: (event) => events.push(event),
  });
  return { idem, events };
}

async function executeThenReplay(store: IdempotencyStore) {
  const { idem } = coordinator(store);
  const key = v7();
  const first = await idem.begin(request(key));
  if (first.action !== 'execute') throw new Error(`expected execute, got ${first.action}`);
  expect(await first.execution.finish(created)).toBe('finalized');
  const again = await idem.begin(request(key));
  expect(again.action).toBe('replay');
  if (again.action === 'replay')
    expect(new TextDecoder().decode(again.response.body ?? undefined)).toBe('{"id":1}');
  const reused = await idem.begin({ ...request(key), body: { item: 'pen' } });
  expect(reused.action === 'reject' && reused.error.code).toBe(ErrorCode.KeyReused);
}

describe('a store that answers synchronously, with promises, or both', () => {
  test('the memory store answers the calls of a request synchronously', () => {
    const store = createMemoryStore({ sweepIntervalMs: false });
    const nowMs = 1_000;
    const owner = 'o';
    const reserved = store.reserve({
      scope: '',
      key: 'k',
      fingerprint: 'f',
      owner,
      nowMs,
      leaseUntilMs: nowMs + 10,
      expiresAtMs: nowMs + 100,
    });
    expect(reserved.outcome).toBe('reserved');
    expect(store.renewLease({ scope: '', key: 'k', owner, leaseUntilMs: nowMs + 20 })).toBe(true);
    const response = { status: 201, headers: {}, body: null };
    expect(store.finalize({ scope: '', key: 'k', owner, response, nowMs })).toBe(true);
    expect(store.load({ scope: '', key: 'k' })?.response).toEqual(response);
    expect(store.release({ scope: '', key: 'k', owner })).toBe(false);
  });

  for (const modes of [
    {},
    { reserve: 'promise', finalize: 'promise' },
    { reserve: 'thenable', finalize: 'thenable' },
    { reserve: 'value', finalize: 'promise' },
    { reserve: 'promise', finalize: 'value' },
    { reserve: 'thenable', finalize: 'value' },
  ] as const) {
    test(`execute, finalize, replay and refuse a reused key: ${JSON.stringify(modes)}`, async () => {
      const { store } = storeAnswering(modes);
      await executeThenReplay(store);
    });
  }

  test('a lazy thenable is run once per call', async () => {
    const { store, runs } = storeAnswering({ reserve: 'thenable', finalize: 'thenable' });
    await executeThenReplay(store);
    expect(runs).toEqual(['reserve', 'finalize', 'reserve', 'reserve']);
  });

  for (const mode of ['throw', 'reject', 'hang'] as const) {
    test(`a reserve that fails (${mode}): 503, a store-error event, nothing reserved`, async () => {
      const { store, inner } = storeAnswering({ reserve: mode });
      const { idem, events } = coordinator(store, 50);
      const result = await idem.begin(request());
      expect(result.action === 'reject' && result.error.status).toBe(503);
      expect(result.action === 'reject' && result.error.code).toBe(ErrorCode.StoreUnavailable);
      expect(events.map((e) => e.type)).toEqual(['store-error']);
      expect(inner.size).toBe(0);
    });

    test(`a finalize that fails (${mode}): finish answers store-error, never throws`, async () => {
      const { store, inner } = storeAnswering({ finalize: mode });
      const { idem, events } = coordinator(store, 50);
      const result = await idem.begin(request());
      if (result.action !== 'execute') throw new Error(result.action);
      expect(await result.execution.finish(created)).toBe('store-error');
      expect(events.map((e) => e.type)).toEqual(['reserved', 'store-error']);
      expect(inner.size).toBe(1); // in flight until its lease lapses
    });
  }

  test('a reserve refused synchronously as a limit: 400 IDEMPOTENCY_STORE_LIMIT, no Retry-After', async () => {
    const { store } = storeAnswering({ reserve: 'limit' });
    const { idem, events } = coordinator(store);
    const result = await idem.begin(request());
    expect(result.action === 'reject' && result.error.status).toBe(400);
    expect(result.action === 'reject' && result.error.code).toBe(ErrorCode.StoreLimit);
    expect(events.map((e) => e.type)).toEqual(['store-limit']);
  });

  test('a finalize refused synchronously as a limit, every time: the key is released', async () => {
    const { store, inner } = storeAnswering({ finalize: 'limit' });
    const { idem } = coordinator(store);
    const result = await idem.begin(request());
    if (result.action !== 'execute') throw new Error(result.action);
    expect(await result.execution.finish(created)).toBe('released');
    expect(inner.size).toBe(0);
  });

  test('a finalize refused synchronously once: the smaller record is kept', async () => {
    const inner = createMemoryStore({ sweepIntervalMs: false });
    let refused = 0;
    const store: IdempotencyStore = {
      reserve: (p) => inner.reserve(p),
      load: (p) => inner.load(p),
      finalize: (p) => {
        if (p.response.body !== null) {
          refused++;
          throw new IdemStoreLimitError('no bodies here');
        }
        return inner.finalize(p);
      },
      release: (p) => inner.release(p),
      renewLease: (p) => inner.renewLease(p),
      purgeExpired: (p) => inner.purgeExpired(p),
    };
    const { idem, events } = coordinator(store);
    const key = v7();
    const result = await idem.begin(request(key));
    if (result.action !== 'execute') throw new Error(result.action);
    expect(await result.execution.finish(created)).toBe('finalized');
    expect(refused).toBe(1);
    const finalized = events.find((e) => e.type === 'finalized');
    expect(finalized && 'omitted' in finalized && finalized.omitted).toBe('body');
    const replay = await idem.begin(request(key));
    expect(replay.action === 'replay' && replay.response.headers['idempotent-replay-body-omitted']).toBe(
      'true',
    );
  });

  test('a reserve that answers after its deadline is released when it lands', async () => {
    let land: (() => void) | undefined;
    const inner = createMemoryStore({ sweepIntervalMs: false });
    const store: IdempotencyStore = {
      reserve: (p) =>
        new Promise((resolve) => {
          land = () => resolve(inner.reserve(p));
        }),
      load: (p) => inner.load(p),
      finalize: (p) => inner.finalize(p),
      release: (p) => inner.release(p),
      renewLease: (p) => inner.renewLease(p),
      purgeExpired: (p) => inner.purgeExpired(p),
    };
    const { idem } = coordinator(store, 20);
    const result = await idem.begin(request());
    expect(result.action === 'reject' && result.error.status).toBe(503);
    land?.();
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(inner.size).toBe(0);
  });

  test('a replay cache hit answers synchronously, over a store that answers with promises', async () => {
    const { store, runs } = storeAnswering({ reserve: 'thenable', load: 'thenable', finalize: 'thenable' });
    const cached = withReplayCache(store);
    const { idem } = coordinator(cached);
    const key = v7();
    const first = await idem.begin(request(key));
    if (first.action !== 'execute') throw new Error(first.action);
    await first.execution.finish(created);
    expect((await idem.begin(request(key))).action).toBe('replay'); // a miss: the store, kept
    const seen = runs.length;
    const hit = cached.reserve({
      scope: '',
      key,
      fingerprint: 'x',
      owner: 'o',
      nowMs: Date.now(),
      leaseUntilMs: Date.now() + 1,
      expiresAtMs: Date.now() + 2,
    });
    expect('then' in hit).toBe(false);
    expect((hit as { outcome: string }).outcome).toBe('exists');
    expect((await idem.begin(request(key))).action).toBe('replay');
    expect(runs.length).toBe(seen); // answered from memory
  });

  test('50 concurrent begins on one key over the memory store: one executes, the others are refused', async () => {
    const { idem, events } = coordinator(createMemoryStore({ sweepIntervalMs: false }));
    const key = v7();
    const results = await Promise.all(Array.from({ length: 50 }, () => idem.begin(request(key))));
    const executed = results.filter((r) => r.action === 'execute');
    expect(executed).toHaveLength(1);
    expect(results.filter((r) => r.action === 'reject' && r.error.status === 409)).toHaveLength(49);
    const [only] = executed;
    if (only?.action !== 'execute') throw new Error('unreachable');
    expect(await only.execution.finish(created)).toBe('finalized');
    const after = await Promise.all(Array.from({ length: 50 }, () => idem.begin(request(key))));
    expect(after.every((r) => r.action === 'replay')).toBe(true);
    expect(events.filter((e) => e.type === 'reserved')).toHaveLength(1);
  });
});
