import {
  type CapturedResponse,
  type FinalizeParams,
  type IdempotencyStore,
  IdemStoreLimitError,
  type StoredResponse,
} from '@idem/core';
import { describe, expect, test } from 'vitest';
import { created, expectExecute, expectReplay, inTransaction, post, setup } from './support/coordinator.js';

// Found by attacking issue 18 item 1 (a response the store cannot hold whole is kept down to its status) and
// item 9 (a transactional finalize reported when it is durable).

/** A store that refuses, at finalize, bodies larger than `bodyBytes` (before its backend, as the SPI says). */
function bodyLimited(store: IdempotencyStore, bodyBytes: number): IdempotencyStore {
  return {
    ...store,
    async finalize(params) {
      if ((params.response.body?.byteLength ?? 0) > bodyBytes)
        throw new IdemStoreLimitError('body too large');
      return store.finalize(params);
    },
  };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('review: finish never throws, whatever redact hands back', () => {
  test('a redact that returns no headers, then a body over the store’s limit: the status is kept', async () => {
    const base = setup();
    const { idem, events } = setup({
      store: bodyLimited(base.backend.store, 2),
      // A host's hook that rebuilds the response and forgets its headers (a JS host, or an `as` cast).
      redact: (response) => ({ status: response.status, body: response.body }) as unknown as StoredResponse,
    });
    const execution = expectExecute(await idem.begin(post()));
    await expect(execution.finish({ status: 201, headers: {}, body: 'made' })).resolves.toBe('finalized');
    expect(base.backend.only()?.response).toMatchObject({ status: 201, body: null, bodyOmitted: true });
    expect(events.some((e) => e.type === 'hook-error' && e.hook === 'redact')).toBe(true);
    expectReplay(await idem.begin(post()));
  });
});

describe('review: finalizeWith whose finalize threw is never reported finalized', () => {
  const answer: CapturedResponse = { status: 201, headers: {}, body: 'x'.repeat(10) };

  test('a limit, then a fault on the smaller record (an aborted transaction); the host still answers 201', async () => {
    const { idem, backend, events } = setup();
    const execution = expectExecute(await idem.begin(post()));
    const calls: StoredResponse[] = [];
    const finalize = (params: FinalizeParams): boolean => {
      calls.push(params.response);
      if (calls.length === 1) throw new IdemStoreLimitError('body too large');
      // PostgreSQL after a failed statement: "current transaction is aborted, commands ignored …"
      throw new Error('current transaction is aborted');
    };
    await expect(execution.finalizeWith(answer, inTransaction(finalize))).rejects.toThrow(
      'current transaction is aborted',
    );
    expect(calls.map((r) => r.body === null)).toEqual([false, true]);
    // The host swallows the error and sends the answer it had: nothing was stored, so nothing is durable.
    expect(await execution.finish(answer)).toBe('released');
    expect(events.map((e) => e.type)).toEqual(['reserved', 'released']);
    expect(backend.records.size).toBe(0);
  });

  test('a fault at once; the host answers with the same status anyway: released, not finalized', async () => {
    const { idem, events } = setup();
    const execution = expectExecute(await idem.begin(post()));
    await expect(
      execution.finalizeWith(
        created(),
        inTransaction(() => {
          throw new Error('connection lost');
        }),
      ),
    ).rejects.toThrow('connection lost');
    expect(await execution.finish(created())).toBe('released');
    expect(events.filter((e) => e.type === 'finalized')).toEqual([]);
  });

  test('not even the status fits: the limit reaches the host, and its other answer releases the key', async () => {
    const { idem, events } = setup();
    const execution = expectExecute(await idem.begin(post()));
    await expect(
      execution.finalizeWith(
        answer,
        inTransaction(() => {
          throw new IdemStoreLimitError('nothing fits');
        }),
      ),
    ).rejects.toBeInstanceOf(IdemStoreLimitError);
    expect(await execution.finish({ status: 500, headers: {}, body: null })).toBe('released');
    expect(events.map((e) => e.type)).toEqual(['reserved', 'released']);
    expectExecute(await idem.begin(post()));
  });

  test('finalizeWith, then abort: released once; a second abort or finish changes nothing', async () => {
    const { idem, backend, events } = setup();
    const execution = expectExecute(await idem.begin(post()));
    await execution.finalizeWith(
      answer,
      inTransaction(() => true),
    ); // written in a transaction that then rolled back
    await Promise.all([execution.abort(), execution.abort(), execution.finish(answer)]);
    expect(events.map((e) => e.type)).toEqual(['reserved', 'released']);
    expect(backend.calls.filter((c) => c === 'release')).toHaveLength(1);
  });
});

describe('review: the smaller records under faults and races', () => {
  test('finish twice and abort at once during the retries: one sequence of finalizes, one answer stored', async () => {
    const base = setup();
    const finalizes: StoredResponse[] = [];
    const store: IdempotencyStore = {
      ...base.backend.store,
      async finalize(params) {
        finalizes.push(params.response);
        await sleep(5);
        if ((params.response.body?.byteLength ?? 0) > 2) throw new IdemStoreLimitError('body too large');
        return base.backend.store.finalize(params);
      },
    };
    const { idem, events } = setup({ store });
    const execution = expectExecute(await idem.begin(post()));
    const answer = { status: 201, headers: { 'content-type': 'text/plain' }, body: 'made' };
    const outcomes = await Promise.all([
      execution.finish(answer),
      execution.finish(answer),
      execution.abort(),
    ]);
    expect(outcomes).toEqual(['finalized', 'already-settled', undefined]);
    expect(finalizes).toHaveLength(2);
    expect(events.filter((e) => e.type === 'finalized')).toHaveLength(1);
    expect(base.backend.calls).not.toContain('release');
  });

  test('a smaller finalize that times out and then succeeds late: store-error, stored once, replayed', async () => {
    const base = setup();
    let calls = 0;
    const store: IdempotencyStore = {
      ...base.backend.store,
      async finalize(params) {
        calls++;
        if (params.response.body !== null) throw new IdemStoreLimitError('body too large');
        await sleep(80); // past storeTimeoutMs: the coordinator gave up on it
        return base.backend.store.finalize(params);
      },
    };
    const { idem } = setup({ store, storeTimeoutMs: 30 });
    const execution = expectExecute(await idem.begin(post()));
    const startedMs = performance.now();
    expect(await execution.finish(created())).toBe('store-error');
    expect(performance.now() - startedMs).toBeLessThan(70);
    expect(calls).toBe(2); // nothing smaller is tried after the timeout: the late one may still land
    await sleep(100);
    expect(calls).toBe(2);
    expect(base.backend.only()?.response).toMatchObject({ status: 201, body: null, bodyOmitted: true });
    expectReplay(await idem.begin(post()));
  });

  test('a store that is slow to refuse: finish takes one timeout per smaller record at most', async () => {
    const base = setup();
    const store: IdempotencyStore = {
      ...base.backend.store,
      async finalize() {
        await sleep(20);
        throw new IdemStoreLimitError('refused after a round trip');
      },
    };
    // A timeout five times the refusal's round trip: at 30 ms, a 20 ms timer that fired late on a loaded machine
    // (a CI run beside other work) read as a timeout, and the answer as a store error.
    const timeoutMs = 100;
    const { idem, events } = setup({ store, storeTimeoutMs: timeoutMs, replayHeaders: ['content-type'] });
    const execution = expectExecute(await idem.begin(post()));
    const startedMs = performance.now();
    const answer = { status: 201, headers: { 'content-type': 'text/plain' }, body: 'made' };
    expect(await execution.finish(answer)).toBe('released');
    const elapsedMs = performance.now() - startedMs;
    // Four finalizes (whole, no body, no headers, status alone), each under its own timeout.
    expect(events.filter((e) => e.type === 'store-limit')).toHaveLength(4);
    expect(elapsedMs).toBeGreaterThanOrEqual(4 * 20 - 5);
    expect(elapsedMs).toBeLessThan(4 * timeoutMs + 60);
  });

  test('a store that writes the record and then throws a limit (against the SPI): the handler still runs once', async () => {
    const base = setup();
    const store: IdempotencyStore = {
      ...base.backend.store,
      async finalize(params) {
        const done = await base.backend.store.finalize(params);
        if (params.response.body !== null) throw new IdemStoreLimitError('refused after writing');
        return done;
      },
    };
    const { idem, events } = setup({ store });
    const execution = expectExecute(await idem.begin(post()));
    // The smaller finalize finds the record completed: reported as a lost lease, but nothing runs again and
    // the whole record (the one written) is what replays.
    expect(await execution.finish(created())).toBe('lease-lost');
    expect(events.some((e) => e.type === 'lease-lost' && e.phase === 'finalize')).toBe(true);
    const replay = expectReplay(await idem.begin(post()));
    expect(Buffer.from(replay.body ?? []).toString()).toBe('{"id":1}');
  });
});
