import {
  createIdempotency,
  type FinalizeParams,
  type IdempotencyRecord,
  type IdempotencyStore,
  type ReplayCache,
  type TransactionalStore,
} from '@idem/core';
import { describe, expect, test } from 'vitest';
import {
  created,
  expectExecute,
  expectPending,
  expectReject,
  expectReplay,
  inTransaction,
  post,
  setup,
} from './support/coordinator.js';

// finalizeWith: the host's own transaction writes the record, in one call (design: transactional finalize).

describe('execution.finalizeWith: finalize inside the host’s transaction in one call', () => {
  test('applies the rule and redact, passes the coordinator’s clock and this owner, and settles the execution', async () => {
    const { idem, backend, clock, events } = setup({
      redact: (stored) => ({ ...stored, headers: { ...stored.headers, location: '/redacted' } }),
    });
    const execution = expectExecute(await idem.begin(post()));
    const seen: FinalizeParams[] = [];
    const outcome = await execution.finalizeWith(
      created(),
      inTransaction((params) => {
        seen.push(params);
        return backend.store.finalize(params);
      }),
    );
    expect(outcome).toBe('finalized');
    expect(seen).toHaveLength(1);
    expect(seen[0]).toMatchObject({
      scope: '',
      key: execution.key,
      owner: execution.owner,
      nowMs: clock.nowMs(),
    });
    expect(seen[0]?.response.headers.location).toBe('/redacted');
    // The response then goes out with the same status: nothing more is written.
    const calls = backend.calls.length;
    expect(await execution.finish(created())).toBe('finalized');
    expect(backend.calls.length).toBe(calls);
    expect(events.filter((e) => e.type === 'finalized')).toEqual([
      expect.objectContaining({ external: true }),
    ]);
    expectReplay(await idem.begin(post()));
  });

  test('a status the rule releases: nothing is written in the transaction, and the answer releases the key', async () => {
    const { idem, backend } = setup();
    const execution = expectExecute(await idem.begin(post()));
    let called = false;
    const outcome = await execution.finalizeWith(
      { status: 503, headers: {}, body: null },
      inTransaction(() => {
        called = true;
        return true;
      }),
    );
    expect(outcome).toBe('not-stored');
    expect(called).toBe(false);
    expect(await execution.finish({ status: 503, headers: {}, body: null })).toBe('released');
    expect(backend.records.size).toBe(0);
  });

  test('a lost reservation is reported as lease-lost, so that the host rolls back', async () => {
    const { idem, events } = setup();
    const execution = expectExecute(await idem.begin(post()));
    expect(
      await execution.finalizeWith(
        created(),
        inTransaction(() => false),
      ),
    ).toBe('lease-lost');
    expect(events.at(-1)).toMatchObject({ type: 'lease-lost', phase: 'finalize' });
    expect(await execution.finish(created())).toBe('already-settled');
  });

  test('the transaction fails after the finalize (rolled back): the answer that goes out releases the key', async () => {
    const { idem, backend } = setup();
    const execution = expectExecute(await idem.begin(post()));
    // The host's transaction: the finalize "happens" inside it, then the commit fails and nothing is kept.
    expect(
      await execution.finalizeWith(
        created(),
        inTransaction(() => true),
      ),
    ).toBe('finalized');
    expect(backend.only()?.response).toBeNull(); // rolled back: still in flight, ours
    expect(await execution.finish({ status: 503, headers: {}, body: null })).toBe('released');
    expect(backend.records.size).toBe(0);
  });

  test('a finalize that throws (the host’s database failed): an abort afterwards releases the key', async () => {
    const { idem, backend } = setup();
    const execution = expectExecute(await idem.begin(post()));
    await expect(
      execution.finalizeWith(
        created(),
        inTransaction(() => {
          throw new Error('connection lost');
        }),
      ),
    ).rejects.toThrow('connection lost');
    await execution.abort();
    expect(backend.records.size).toBe(0);
  });

  test('after a commit that went through, a different answer changes nothing: the record stays completed', async () => {
    const { idem, backend } = setup();
    const execution = expectExecute(await idem.begin(post()));
    await execution.finalizeWith(
      created(),
      inTransaction((params) => backend.store.finalize(params)),
    );
    expect(await execution.finish({ status: 500, headers: {}, body: null })).toBe('finalized');
    expect(backend.only()?.response?.status).toBe(201);
  });
});

describe('hooks receive the request, not data packed into the scope', () => {
  test('redact and rebuildReplay get scope, key, method, route, path and the adapter’s host object', async () => {
    const contexts: unknown[] = [];
    const { idem } = setup({
      redact: (stored, context) => {
        contexts.push(context);
        return stored;
      },
      rebuildReplay: (_stored, context) => {
        contexts.push(context);
        return undefined;
      },
    });
    const host = { params: { prefix: 'warehouse-1' } };
    const request = post({
      scope: 'alice',
      route: '/v1/:prefix/orders',
      path: '/v1/warehouse-1/orders',
      host,
    });
    await expectExecute(await idem.begin(request)).finish(created());
    expectReplay(await idem.begin(request));
    const expected = {
      scope: 'alice',
      key: request.key,
      method: 'POST',
      route: '/v1/:prefix/orders',
      path: '/v1/warehouse-1/orders',
      host,
    };
    expect(contexts).toHaveLength(2);
    for (const context of contexts) expect(context).toMatchObject(expected);
  });
});

describe('a store with a replay cache, reserved in the host’s transaction', () => {
  /** The test store with a replay cache of its own (a Map that honours expiry and keeps only completed records). */
  function cachedSetup() {
    const kept = new Map<string, IdempotencyRecord>();
    const offered: IdempotencyRecord[] = [];
    const replayCache: ReplayCache = {
      get: ({ scope, key }, nowMs) => {
        const record = kept.get(`${scope}\n${key}`);
        return record !== undefined && nowMs < record.expiresAtMs ? record : undefined;
      },
      keep: (record, nowMs) => {
        offered.push(record);
        if (record.response !== null && nowMs < record.expiresAtMs)
          kept.set(`${record.scope}\n${record.key}`, record);
      },
    };
    const context = setup({ reserveIn: 'transaction' });
    const idem = createIdempotency({
      store: { ...context.backend.store, replayCache },
      clock: context.clock,
      heartbeatIntervalMs: false,
      reserveIn: 'transaction',
      onEvent: (event) => context.events.push(event),
    });
    const { reserve, finalize, release } = context.backend.store;
    const tx: TransactionalStore = { reserve, finalize, release };
    return { ...context, idem, tx, kept, offered };
  }

  test('a completed record the transaction found is kept, and its next retry replays before any transaction', async () => {
    const { idem, backend, tx, kept, offered, events } = cachedSetup();
    const first = expectPending(await idem.begin(post()));
    expect((await first.reserveWith(tx)).action).toBe('execute');
    expect(await first.finalizeWith(created(), tx)).toBe('finalized');
    await first.finish(created());
    expect(offered).toEqual([]); // its own answer is not offered: the transaction may still roll back
    const second = expectPending(await idem.begin(post()));
    expect((await second.reserveWith(tx)).action).toBe('replay');
    expect(kept.size).toBe(1);
    const calls = backend.calls.length;
    const replayed = events.filter((event) => event.type === 'replayed').length;
    expect(expectReplay(await idem.begin(post())).status).toBe(201); // no execution, no transaction
    expect(backend.calls.length).toBe(calls);
    expect(events.filter((event) => event.type === 'replayed').length).toBe(replayed + 1);
    // The key used for another request is refused from memory too.
    expectReject(await idem.begin(post({ body: { item: 'pen' } })), 422, 'IDEMPOTENCY_KEY_REUSED');
    expect(backend.calls.length).toBe(calls);
  });

  test('an in-flight record is offered but never answers from memory: the duplicate goes to the transaction', async () => {
    const { idem, tx, kept, offered } = cachedSetup();
    const first = expectPending(await idem.begin(post()));
    expect((await first.reserveWith(tx)).action).toBe('execute');
    const duplicate = expectPending(await idem.begin(post()));
    expect((await duplicate.reserveWith(tx)).action).toBe('reject');
    expect(offered).toHaveLength(1);
    expect(kept.size).toBe(0);
    expectPending(await idem.begin(post()));
  });

  test('past its expiry the kept record answers nothing: the key runs again through the transaction', async () => {
    const { idem, tx, clock } = cachedSetup();
    const first = expectPending(await idem.begin(post()));
    await first.reserveWith(tx);
    await first.finalizeWith(created(), tx);
    await first.finish(created());
    await expectPending(await idem.begin(post())).reserveWith(tx); // found and kept
    expectReplay(await idem.begin(post()));
    clock.advance(24 * 60 * 60 * 1000 + 60_000); // the lifetime and the grace: expired
    const again = expectPending(await idem.begin(post()));
    expect((await again.reserveWith(tx)).action).toBe('execute');
  });
});

describe('readBeforeTransaction: a completed record is answered by one read, before any transaction', () => {
  /** A key run to completion through the transaction, then the read-first coordinator and the store's calls since. */
  async function completedSetup(options: Parameters<typeof setup>[0] = {}) {
    const context = setup({ reserveIn: 'transaction', readBeforeTransaction: true, ...options });
    const { reserve, finalize, release } = context.backend.store;
    const tx: TransactionalStore = { reserve, finalize, release };
    const first = expectPending(await context.idem.begin(post()));
    expect((await first.reserveWith(tx)).action).toBe('execute');
    expect(await first.finalizeWith(created(), tx)).toBe('finalized');
    await first.finish(created());
    context.backend.calls.length = 0;
    return { ...context, tx };
  }

  test('a retry replays from the read: no transaction, no reserve, a replayed event', async () => {
    const { idem, backend, events } = await completedSetup();
    expect(expectReplay(await idem.begin(post())).status).toBe(201);
    expect(backend.calls).toEqual(['load']);
    expect(events.at(-1)).toMatchObject({ type: 'replayed', status: 201 });
  });

  test('the key used for another request is refused from the read', async () => {
    const { idem, backend } = await completedSetup();
    expectReject(await idem.begin(post({ body: { item: 'pen' } })), 422, 'IDEMPOTENCY_KEY_REUSED');
    expect(backend.calls).toEqual(['load']);
  });

  test('a fresh key costs one read, then goes to the transaction', async () => {
    const { idem, backend, tx } = await completedSetup();
    const fresh = expectPending(await idem.begin(post({ key: '01890a5d-ac96-774b-bcce-b302099a8057' })));
    expect(backend.calls).toEqual(['load']);
    expect((await fresh.reserveWith(tx)).action).toBe('execute');
  });

  test('a record in flight is left to the transaction, which decides under its lock', async () => {
    const { idem, backend, tx } = setupInFlight();
    const first = expectPending(await idem.begin(post()));
    expect((await first.reserveWith(tx)).action).toBe('execute');
    const duplicate = expectPending(await idem.begin(post()));
    expect(backend.calls).toEqual(['load', 'reserve', 'load']); // one read per begin
    expect((await duplicate.reserveWith(tx)).action).toBe('reject');
  });

  test('an expired record is left to the transaction, which runs the key again', async () => {
    const { idem, clock, tx } = await completedSetup();
    clock.advance(24 * 60 * 60 * 1000 + 60_000);
    const again = expectPending(await idem.begin(post()));
    expect((await again.reserveWith(tx)).action).toBe('execute');
  });

  test.each([
    ['throws', 'throw'],
    ['refuses a limit', 'limit'],
  ] as const)('a read that %s is left to the transaction, which decides and reports', async (_, fault) => {
    const { idem, backend, events, tx } = await completedSetup();
    backend.inject('load', fault);
    const before = events.length;
    const retry = expectPending(await idem.begin(post()));
    expect(events.length).toBe(before); // the read decided nothing: one request's outage is one event
    expect((await retry.reserveWith(tx)).action).toBe('replay');
    expect(events.slice(before).map((event) => event.type)).toEqual(['replayed']);
  });

  test('a read that hangs past storeTimeoutMs is given up on, and the transaction decides', async () => {
    const { idem, backend, tx } = await completedSetup({ storeTimeoutMs: 20 });
    backend.inject('load', 'hang');
    const retry = expectPending(await idem.begin(post())); // (a read never given up on would hang this test)
    backend.resume();
    expect((await retry.reserveWith(tx)).action).toBe('replay');
  });

  test('with a replay cache, the store’s own read is the only look: it answers from its cache', async () => {
    const context = setup({ reserveIn: 'transaction' });
    const kept = new Map<string, IdempotencyRecord>();
    let looked = 0;
    const replayCache: ReplayCache = {
      get: () => {
        looked++;
        return undefined;
      },
      keep: (record) => void kept.set(record.key, record),
    };
    const inner = context.backend.store;
    // As withReplayCache's: the cache first, else the store, and what it reads is kept.
    const load: IdempotencyStore['load'] = async (ref) =>
      kept.get(ref.key) ??
      (await Promise.resolve(inner.load(ref)).then((record) => {
        if (record?.response) kept.set(record.key, record);
        return record;
      }));
    const idem = createIdempotency({
      store: { ...inner, load, replayCache },
      clock: context.clock,
      heartbeatIntervalMs: false,
      reserveIn: 'transaction',
      readBeforeTransaction: true,
    });
    const { reserve, finalize, release } = inner;
    const tx: TransactionalStore = { reserve, finalize, release };
    const first = expectPending(await idem.begin(post()));
    await first.reserveWith(tx);
    await first.finalizeWith(created(), tx);
    await first.finish(created());
    context.backend.calls.length = 0;
    expectReplay(await idem.begin(post()));
    expectReplay(await idem.begin(post()));
    expect(context.backend.calls).toEqual(['load']); // the second answered from the cache
    expect(looked).toBe(0);
  });

  test('a request past its deadline is not read for: the transaction answers (its own timeout)', async () => {
    const { idem, backend } = await completedSetup({ deadline: () => performance.now() - 1 });
    expectPending(await idem.begin(post()));
    expect(backend.calls).toEqual([]);
  });

  test('a read still running at the request’s deadline is given up on then, not at storeTimeoutMs', async () => {
    let asked: unknown;
    const { idem, backend, tx } = await completedSetup({
      storeTimeoutMs: 60_000, // (waited for, this test would time out)
      deadline: (request) => {
        asked = request.host;
        return performance.now() + 20;
      },
    });
    backend.inject('load', 'hang');
    const retry = expectPending(await idem.begin(post({ host: 'the request' })));
    expect(asked).toBe('the request');
    backend.inject('load', undefined);
    backend.resume();
    expect((await retry.reserveWith(tx)).action).toBe('replay');
  });

  test('a deadline hook that throws is no deadline', async () => {
    const { idem, backend } = await completedSetup({
      deadline: () => {
        throw new Error('no deadline here');
      },
    });
    expectReplay(await idem.begin(post()));
    expect(backend.calls).toEqual(['load']);
  });

  test('without it, nothing is read before the transaction', async () => {
    const { idem, backend } = await completedSetup({ readBeforeTransaction: false });
    expectPending(await idem.begin(post()));
    expect(backend.calls).toEqual([]);
  });

  test('with reserveIn "begin" it changes nothing: begin reserves, as always', async () => {
    const { idem, backend } = setup({ readBeforeTransaction: true });
    expectExecute(await idem.begin(post()));
    expect(backend.calls).toEqual(['reserve']);
  });

  function setupInFlight() {
    const context = setup({ reserveIn: 'transaction', readBeforeTransaction: true });
    const { reserve, finalize, release } = context.backend.store;
    return { ...context, tx: { reserve, finalize, release } as TransactionalStore };
  }
});
