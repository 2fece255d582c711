import type { FinalizeParams, ReserveParams, ReserveResult, TransactionalStore } from '@idem/core';
import { describe, expect, test } from 'vitest';
import {
  created,
  expectExecute,
  expectPending,
  failOnUnhandledRejections,
  inTransaction,
  post,
  setup,
} from './support/coordinator.js';

// Review: interleavings of reserveWith / finalizeWith / finish / abort / heartbeat.

failOnUnhandledRejections();

/** What `reserveWith` answers once its request was answered while it reserved: a refusal, nothing to run. */
const answeredMeanwhile = {
  action: 'reject',
  error: expect.objectContaining({ code: 'IDEMPOTENCY_IN_PROGRESS' }),
};

function deferred<T>() {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** A transactional view whose reserve waits for the test (a row lock wait). */
function gatedTx(backend: ReturnType<typeof setup>['backend']) {
  const gate = deferred<void>();
  const tx: TransactionalStore = {
    reserve: async (p: ReserveParams): Promise<ReserveResult> => {
      await gate.promise;
      return backend.store.reserve(p);
    },
    finalize: (p: FinalizeParams) => backend.store.finalize(p),
    release: (p) => backend.store.release(p),
  };
  return { tx, open: () => gate.resolve() };
}

const r503 = { status: 503, headers: {}, body: null };

describe('transactional: an answer or abort while reserveWith waits on the row lock', () => {
  test('abort() while reserveWith is pending, reserve then reserves: reserveWith must not throw a lifecycle bug', async () => {
    const { idem, backend, events } = setup({ reserveIn: 'transaction' });
    const execution = expectPending(await idem.begin(post()));
    const { tx, open } = gatedTx(backend);
    const reserving = execution.reserveWith(tx);
    await execution.abort(); // the server broke the response off; nothing reserved yet
    open();
    // Answered before its key was reserved: told to do nothing (no internal transition error, no execute).
    expect(await reserving).toEqual(answeredMeanwhile);
    expect(execution.state).toBe('settled');
    void events;
  });

  test('finish(503) (a timeout middleware answered) while reserveWith is pending: reserveWith must not throw a lifecycle bug', async () => {
    const { idem, backend } = setup({ reserveIn: 'transaction' });
    const execution = expectPending(await idem.begin(post()));
    const { tx, open } = gatedTx(backend);
    const reserving = execution.reserveWith(tx);
    expect(await execution.finish(r503)).toBe('not-reserved');
    open();
    // Answered before its key was reserved: told to do nothing (no internal transition error, no execute).
    expect(await reserving).toEqual(answeredMeanwhile);
  });

  test('abort() while reserveWith is pending and the key is completed (replay): no lifecycle bug error', async () => {
    const { idem, backend } = setup({ reserveIn: 'transaction' });
    // complete the key first
    const first = expectPending(await idem.begin(post()));
    const direct: TransactionalStore = backend.store;
    expect(await first.reserveWith(direct)).toEqual({ action: 'execute' });
    expect(await first.finalizeWith(created(), direct)).toBe('finalized');
    expect(await first.finish(created())).toBe('finalized');
    const execution = expectPending(await idem.begin(post()));
    const { tx, open } = gatedTx(backend);
    const reserving = execution.reserveWith(tx);
    await execution.abort();
    open();
    // Answered before its key was reserved: told to do nothing (no internal transition error, no execute).
    expect(await reserving).toEqual(answeredMeanwhile);
  });

  test('two concurrent reserveWith calls: the second must not throw an internal lifecycle error', async () => {
    const { idem, backend } = setup({ reserveIn: 'transaction' });
    const execution = expectPending(await idem.begin(post()));
    const results = await Promise.allSettled([
      execution.reserveWith(backend.store),
      execution.reserveWith(backend.store),
    ]);
    const messages = results.map((r) => (r.status === 'rejected' ? (r.reason as Error).message : 'ok'));
    expect(messages.join('|')).not.toContain('no transition');
    // One reserves; the other is refused as a request in progress.
    expect(results.map((r) => (r.status === 'fulfilled' ? r.value.action : 'threw')).sort()).toEqual([
      'execute',
      'reject',
    ]);
  });
});

describe('finish / abort / finalizeWith interleavings never throw', () => {
  const lifecycles = ['leased', 'transactional'] as const;
  type Op = 'finish201' | 'finish503' | 'abort' | 'finalizeWith201' | 'finalizeWith503';
  const ops: Op[] = ['finish201', 'finish503', 'abort', 'finalizeWith201', 'finalizeWith503'];

  async function reserved(lifecycle: (typeof lifecycles)[number]) {
    const s = setup(lifecycle === 'transactional' ? { reserveIn: 'transaction' } : {});
    if (lifecycle === 'leased') return { ...s, execution: expectExecute(await s.idem.begin(post())) };
    const execution = expectPending(await s.idem.begin(post()));
    expect(await execution.reserveWith(s.backend.store)).toEqual({ action: 'execute' });
    return { ...s, execution };
  }

  function run(op: Op, execution: Awaited<ReturnType<typeof reserved>>['execution'], tx: TransactionalStore) {
    switch (op) {
      case 'finish201':
        return execution.finish(created());
      case 'finish503':
        return execution.finish(r503);
      case 'abort':
        return execution.abort();
      case 'finalizeWith201':
        return execution.finalizeWith(created(), tx);
      case 'finalizeWith503':
        return execution.finalizeWith(r503, tx);
    }
  }

  for (const lifecycle of lifecycles) {
    for (const a of ops) {
      for (const b of ops) {
        test(`${lifecycle}: ${a} ∥ ${b} (and then finish) never throws a lifecycle error`, async () => {
          const { execution, backend } = await reserved(lifecycle);
          const tx: TransactionalStore =
            lifecycle === 'leased'
              ? inTransaction((p) => backend.store.finalize(p))
              : (backend.store as TransactionalStore);
          const results = await Promise.allSettled([run(a, execution, tx), run(b, execution, tx)]);
          for (const r of results) {
            if (r.status === 'rejected') {
              expect(String((r.reason as Error).message)).not.toContain('no transition');
            }
          }
          // The answer goes out afterwards: finish and abort never throw.
          await expect(execution.finish(created())).resolves.toBeTypeOf('string');
          await expect(execution.abort()).resolves.toBeUndefined();
          expect(execution.state).toBe('settled');
        });
      }
    }
  }
});

describe('an answer while the transactional finalize is still running', () => {
  test('finish with the written status before finalizeWith resolved, finalize then finds the key lost: no `finalized` event', async () => {
    const { idem, events } = setup();
    const execution = expectExecute(await idem.begin(post()));
    const gate = deferred<boolean>();
    const finalizing = execution.finalizeWith(
      created(),
      inTransaction(() => gate.promise),
    );
    // The answer goes out with the written status while the finalize has not answered yet.
    const finished = execution.finish(created());
    gate.resolve(false); // the finalize found another owner: the host rolls back
    expect(await finalizing).toBe('lease-lost');
    await finished;
    // An event reports what is durable: nothing was.
    expect(events.filter((e) => e.type === 'finalized')).toEqual([]);
  });

  test('finish with the written status before finalizeWith resolved, finalize then throws: no `finalized` event', async () => {
    const { idem, events } = setup();
    const execution = expectExecute(await idem.begin(post()));
    const gate = deferred<boolean>();
    const finalizing = execution.finalizeWith(
      created(),
      inTransaction(() => gate.promise),
    );
    const finished = execution.finish(created());
    gate.reject(new Error('deadlock detected'));
    await expect(finalizing).rejects.toThrow('deadlock');
    await finished;
    expect(events.filter((e) => e.type === 'finalized')).toEqual([]);
  });

  test('abort while finalizeWith is pending (leased): the abort waits for the write, and reads what it wrote', async () => {
    const { idem, backend } = setup();
    const execution = expectExecute(await idem.begin(post()));
    const gate = deferred<boolean>();
    const finalizing = execution.finalizeWith(
      created(),
      inTransaction(async (p) => {
        await gate.promise;
        return backend.store.finalize(p);
      }),
    );
    const aborting = execution.abort();
    gate.resolve(true);
    await aborting;
    // The write went through (this transaction commits what it writes): the abort finds it completed, and the
    // record stands; nothing releases a completed record.
    expect(await finalizing).toBe('finalized');
    expect(execution.state).toBe('settled');
    expect(backend.only()?.response?.status).toBe(201);
  });
});
