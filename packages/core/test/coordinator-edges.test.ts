import {
  ErrorCode,
  type IdempotencyStore,
  IdemStoreLimitError,
  IdemStoreUnavailableError,
  UNSEEN_BODY,
} from '@idem/core';
import { describe, expect, test } from 'vitest';
import {
  created,
  expectExecute,
  expectReject,
  expectReplay,
  inTransaction,
  post,
  setup,
} from './support/coordinator.js';

const boom = () => {
  throw new Error('hook failure');
};

describe('coordinator: host hooks that throw never reach the request (design: The coordinator)', () => {
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

  test('a transactional finalize (finalizeWith) never throws either: the status alone is what it writes', async () => {
    const { idem } = setup({ redact: boom, finalizationRule: boom });
    const execution = expectExecute(await idem.begin(post()));
    const written: unknown[] = [];
    const outcome = await execution.finalizeWith(
      created(),
      inTransaction((params) => {
        written.push(params.response);
        return true;
      }),
    );
    expect(outcome).toBe('finalized');
    expect(written).toEqual([{ status: 201, headers: {}, body: null, bodyOmitted: true }]);
  });

  test('a throwing rebuildReplay: the stored answer is replayed', async () => {
    const { idem, events } = setup({ rebuildReplay: () => Promise.reject(new Error('no view')) });
    await expectExecute(await idem.begin(post())).finish(created());
    const replay = expectReplay(await idem.begin(post()));
    expect(Buffer.from(replay.body ?? []).toString()).toBe('{"id":1}');
    expect(events).toContainEqual(expect.objectContaining({ type: 'hook-error', hook: 'rebuildReplay' }));
  });

  test.each([
    ['begin', {}],
    ['a read before the transaction', { reserveIn: 'transaction', readBeforeTransaction: true }],
  ] as const)(
    'a rebuildReplay that cannot read what it needs now: a retryable 503, at %s',
    async (_, options) => {
      const cannot = new IdemStoreUnavailableError('the table cannot be read now', { status: 599 });
      let failing = false;
      const { idem, events, backend } = setup({
        ...options,
        statuses: { storeUnavailable: 503 },
        retryAfterSeconds: 7,
        rebuildReplay: (stored) => (failing ? Promise.reject(cannot) : stored),
      });
      const first = await idem.begin(post());
      if (first.action === 'reserve-in-transaction') {
        const { reserve, finalize, release } = backend.store;
        await first.execution.reserveWith({ reserve, finalize, release });
        await first.execution.finalizeWith(created(), { reserve, finalize, release });
        await first.execution.finish(created());
      } else await expectExecute(first).finish(created());
      failing = true;
      const before = events.length;
      const error = expectReject(await idem.begin(post()), 503, 'IDEMPOTENCY_STORE_UNAVAILABLE');
      expect(error).toMatchObject({
        message: 'the table cannot be read now',
        retryAfterSeconds: 7,
        cause: cannot,
      });
      // Reported as the failed read it is, with the answer it got: never as a replay, nor as a hook's fault.
      expect(events.slice(before)).toEqual([
        expect.objectContaining({ type: 'store-error', operation: 'load', status: 503, error: cannot }),
      ]);
      failing = false;
      expectReplay(await idem.begin(post()));
      expect(events.at(-1)).toMatchObject({ type: 'replayed', status: 201 });
    },
  );

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

  test('at finalize, when not even the status fits: the key is released, never left blocked for its lease', async () => {
    const { idem, backend, events } = setup();
    const execution = expectExecute(await idem.begin(post()));
    backend.inject('finalize', 'limit');
    expect(await execution.finish(created())).toBe('released');
    expect(backend.records.size).toBe(0);
    expect(events.at(-1)).toMatchObject({ type: 'released', reason: 'unstorable', status: 201 });
    backend.inject('finalize', undefined);
    expectExecute(await idem.begin(post()));
  });
});

/** A store that refuses, at finalize, headers or bodies larger than it holds (as the SQL and Redis stores do). */
function limitedStore(store: IdempotencyStore, bounds: { headerBytes?: number; bodyBytes?: number }) {
  return {
    ...store,
    async finalize(params) {
      const { headers, body } = params.response;
      if (JSON.stringify(headers).length > (bounds.headerBytes ?? Number.POSITIVE_INFINITY)) {
        throw new IdemStoreLimitError('headers too large');
      }
      if ((body?.byteLength ?? 0) > (bounds.bodyBytes ?? Number.POSITIVE_INFINITY)) {
        throw new IdemStoreLimitError('body too large');
      }
      return store.finalize(params);
    },
  } satisfies IdempotencyStore;
}

describe('coordinator: a response the store cannot hold whole is kept as far as it fits, never run again', () => {
  const link = `<${'x'.repeat(70_000)}>; rel="next"`;
  const answer = { status: 201, headers: { 'content-type': 'text/plain', link }, body: 'made' };

  test.each([
    [
      'headers over the store’s limit: the status and body are kept, the headers marked omitted',
      { headerBytes: 65_536 },
      'headers',
      { status: 201, headers: { 'idempotent-replay-headers-omitted': 'true' }, body: 'made' },
    ],
    [
      'a body over the store’s (undeclared) limit: the status and headers are kept, the body marked omitted',
      { bodyBytes: 2 },
      'body',
      {
        status: 201,
        headers: { 'content-type': 'text/plain', link, 'idempotent-replay-body-omitted': 'true' },
        body: null,
      },
    ],
    [
      'both over: the status alone, both marked omitted',
      { headerBytes: 65_536, bodyBytes: 2 },
      'body-and-headers',
      {
        status: 201,
        headers: { 'idempotent-replay-headers-omitted': 'true', 'idempotent-replay-body-omitted': 'true' },
        body: null,
      },
    ],
  ] as const)('%s', async (_, bounds, omitted, replayed) => {
    const backend = setup();
    const { idem, events } = setup({
      store: limitedStore(backend.backend.store, bounds),
      replayHeaders: ['content-type', 'link'],
    });
    let executions = 0;
    for (let attempt = 0; attempt < 4; attempt++) {
      const result = await idem.begin(post());
      if (result.action === 'execute') {
        executions++;
        expect(await result.execution.finish(answer)).toBe('finalized');
        continue;
      }
      const replay = expectReplay(result);
      expect(replay.status).toBe(replayed.status);
      expect(replay.headers).toEqual({ ...replayed.headers, 'idempotent-replayed': 'true' });
      expect(replay.body === null ? null : Buffer.from(replay.body).toString()).toBe(replayed.body);
    }
    expect(executions).toBe(1);
    expect(events.find((e) => e.type === 'finalized')).toMatchObject({ status: 201, omitted });
  });

  test('an encoded body kept without its headers keeps its content-encoding', async () => {
    const backend = setup();
    const { idem } = setup({
      store: limitedStore(backend.backend.store, { headerBytes: 65_536 }),
      replayHeaders: ['content-type', 'link'],
    });
    const execution = expectExecute(await idem.begin(post()));
    await execution.finish({ ...answer, body: Buffer.from([0x1f, 0x8b]), contentEncoding: 'gzip' });
    expect(backend.backend.only()?.response?.headers).toEqual({
      'content-encoding': 'gzip',
      'idempotent-replay-headers-omitted': 'true',
    });
  });

  test('in the host’s transaction (finalizeWith): the smaller record is written in the same transaction', async () => {
    const backend = setup();
    const { idem, events } = setup({
      store: backend.backend.store,
      replayHeaders: ['content-type', 'link'],
    });
    const limited = limitedStore(backend.backend.store, { headerBytes: 65_536 });
    const execution = expectExecute(await idem.begin(post()));
    expect(
      await execution.finalizeWith(
        answer,
        inTransaction((params) => limited.finalize(params)),
      ),
    ).toBe('finalized');
    expect(await execution.finish(answer)).toBe('finalized');
    expect(backend.backend.only()?.response?.headers).toEqual({
      'idempotent-replay-headers-omitted': 'true',
    });
    expect(events.find((e) => e.type === 'finalized')).toMatchObject({ omitted: 'headers', external: true });
    expectReplay(await idem.begin(post()));
  });
});

describe('coordinator: the transactional finalize is reported when it is durable, not before the commit', () => {
  test('a commit that fails after finalizeWith (the host answers 503): released, never finalized', async () => {
    const { idem, backend, events } = setup();
    const execution = expectExecute(await idem.begin(post()));
    expect(
      await execution.finalizeWith(
        created(),
        inTransaction((params) => backend.store.finalize(params)),
      ),
    ).toBe('finalized');
    // The commit fails: the record the transaction wrote is rolled back with it.
    const record = backend.only();
    if (record === undefined) throw new Error('no record');
    backend.records.set(JSON.stringify(['', record.key]), {
      ...record,
      response: null,
      owner: execution.owner,
    });
    expect(events.map((e) => e.type)).toEqual(['reserved']);
    expect(await execution.finish({ status: 503, headers: {}, body: null })).toBe('released');
    expect(events.map((e) => (e.type === 'released' ? `released:${e.status}` : e.type))).toEqual([
      'reserved',
      'released:503',
    ]);
  });

  test('a commit that went through: finalized once the answer goes out with the stored status', async () => {
    const { idem, backend, events } = setup();
    const execution = expectExecute(await idem.begin(post()));
    await execution.finalizeWith(
      created(),
      inTransaction((params) => backend.store.finalize(params)),
    );
    expect(events.map((e) => e.type)).toEqual(['reserved']);
    expect(await execution.finish(created())).toBe('finalized');
    expect(events.map((e) => e.type)).toEqual(['reserved', 'finalized']);
    expect(events[1]).toMatchObject({ type: 'finalized', status: 201, external: true });
  });

  test('a commit of unknown outcome that did commit (the host answers 503, the release finds it completed): finalized', async () => {
    const { idem, backend, events } = setup();
    const execution = expectExecute(await idem.begin(post()));
    await execution.finalizeWith(
      created(),
      inTransaction((params) => backend.store.finalize(params)),
    );
    expect(await execution.finish({ status: 503, headers: {}, body: null })).toBe('finalized');
    expect(events.map((e) => e.type)).toEqual(['reserved', 'finalized']);
    expect(events[1]).toMatchObject({ status: 201 });
  });

  test('the client leaves after finalizeWith and the commit failed: released', async () => {
    const { idem, backend, events } = setup();
    const execution = expectExecute(await idem.begin(post()));
    await execution.finalizeWith(
      created(),
      inTransaction(() => true),
    ); // written in a transaction that then rolled back
    await execution.abort();
    expect(events.map((e) => e.type)).toEqual(['reserved', 'released']);
    expect(backend.records.size).toBe(0);
  });
});

describe('coordinator: the remaining limits', () => {
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

describe('coordinator: a Blob body (what a fetch-style host hands over) is hashed by the bytes it holds', () => {
  test('the same bytes replay; other bytes under the key are refused; a custom fingerprint gets the Blob', async () => {
    const { idem } = setup();
    const upload = (text: string) =>
      post({ body: new Blob([text]), contentType: 'application/octet-stream' });
    await expectExecute(await idem.begin(upload('first upload'))).finish(created());
    expectReplay(await idem.begin(upload('first upload')));
    expectReject(await idem.begin(upload('other upload')), 422, ErrorCode.KeyReused);
    const seen: unknown[] = [];
    const custom = setup({
      fingerprint: (request) => {
        seen.push(request.body);
        return 'fp';
      },
    });
    expectExecute(await custom.idem.begin(upload('x')));
    expect(seen[0]).toBeInstanceOf(Blob);
  });
});

describe('coordinator: a keyed body that no parser read is the client’s or the app’s mistake, not a 500', () => {
  test('415 IDEMPOTENCY_BODY_UNSEEN, nothing reserved; without a key it proceeds; the status is an option', async () => {
    const { idem, backend } = setup();
    const error = expectReject(
      await idem.begin(post({ body: UNSEEN_BODY, contentType: 'text/plain' })),
      415,
      ErrorCode.BodyUnseen,
    );
    expect(error.message).toMatch(/"text\/plain"/);
    expect(error.headers).toEqual({});
    expect(backend.calls).toEqual([]);
    expect((await idem.begin(post({ body: UNSEEN_BODY, key: undefined }))).action).toBe('proceed');
    const custom = setup({ statuses: { bodyUnseen: 400 } });
    expectReject(await custom.idem.begin(post({ body: UNSEEN_BODY })), 400, ErrorCode.BodyUnseen);
  });

  test('a host fingerprint function decides for itself', async () => {
    const { idem } = setup({ fingerprint: () => 'fp' });
    expectExecute(await idem.begin(post({ body: UNSEEN_BODY })));
  });
});

describe('coordinator: the store calls before the handler end by the request’s deadline', () => {
  test('a reserve not answered by the deadline is the store’s timeout; its late reservation is freed', async () => {
    const { idem, backend, events } = setup({
      storeTimeoutMs: 60_000, // (waited for, this test would time out)
      deadline: () => performance.now() + 20,
    });
    backend.inject('reserve', 'hang');
    expectReject(await idem.begin(post()), 503, 'IDEMPOTENCY_STORE_UNAVAILABLE');
    expect(events.at(-1)).toMatchObject({ type: 'store-error', operation: 'reserve', status: 503 });
    backend.inject('reserve', undefined);
    backend.resume();
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(backend.calls).toEqual(['reserve', 'release']);
    expect(backend.records.size).toBe(0);
    expectExecute(await idem.begin(post())); // (the deadline is fresh for every request)
  });

  test.each([
    ['closed', 503],
    ['open', undefined],
  ] as const)('past the deadline the store is not called (fail %s)', async (failMode, status) => {
    const { idem, backend } = setup({ failMode, deadline: () => performance.now() - 1 });
    const result = await idem.begin(post());
    expect(backend.calls).toEqual([]);
    if (status === undefined) expect(result).toMatchObject({ action: 'proceed', reason: 'fail-open' });
    else expectReject(result, status, 'IDEMPOTENCY_STORE_UNAVAILABLE');
  });

  test('a store that answers in time is not held to the deadline’s timer', async () => {
    const { idem } = setup({ deadline: () => performance.now() + 10_000 });
    expectExecute(await idem.begin(post()));
  });
});
