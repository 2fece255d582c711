import { readFileSync } from 'node:fs';
import {
  type CapturedResponse,
  type ExecutionState,
  type IdempotencyRecord,
  LEASED,
  type LeasedExecution,
  TRANSACTIONAL,
  type TransactionalExecution,
  type TransactionalStore,
} from '@idem/core';
import { describe, expect, test } from 'vitest';
import {
  created,
  expectExecute,
  expectPending,
  expectReplay,
  inTransaction,
  post,
  setup,
} from './support/coordinator.js';
import type { createTestStore } from './support/test-store.js';

// Every named transition of both lifecycles (design.md, "Lifecycles"), walked from its start state: the state
// it ends in, what the call answers, and what the store holds after. The tables are typed so that a transition
// added to a lifecycle without a walk here does not compile.

const released: CapturedResponse = { status: 503, headers: {}, body: null };

/**
 * A host transaction over the test store: its writes go through at once and `rollBack` puts the records back
 * as they were when it began (what a database does to the writes of a transaction that fails).
 */
function transaction(backend: ReturnType<typeof createTestStore>) {
  const before = new Map<string, IdempotencyRecord>(backend.records);
  const { reserve, finalize, release } = backend.store;
  const store: TransactionalStore = { reserve, finalize, release };
  return {
    store,
    rollBack() {
      backend.records.clear();
      for (const [id, record] of before) backend.records.set(id, record);
    },
  };
}

async function leased(options: Parameters<typeof setup>[0] = {}) {
  const context = setup(options);
  const execution = expectExecute(await context.idem.begin(post()));
  expect(execution.state).toBe('reserved');
  return { ...context, execution };
}

async function pending() {
  const context = setup({ reserveIn: 'transaction' });
  const execution = expectPending(await context.idem.begin(post()));
  expect(execution.state).toBe('pending');
  expect(context.backend.calls).toEqual([]); // begin reserves nothing in this lifecycle
  return { ...context, execution };
}

/** A transactional execution reserved in a transaction of the test store. */
async function reservedInTransaction() {
  const context = await pending();
  const tx = transaction(context.backend);
  expect(await context.execution.reserveWith(tx.store)).toEqual({ action: 'execute' });
  return { ...context, tx };
}

const lost = async (execution: LeasedExecution | TransactionalExecution) => {
  for (let i = 0; i < 200 && execution.state !== 'lost'; i++) await new Promise((r) => setTimeout(r, 5));
  expect(execution.state).toBe('lost');
};

/** Another request owns the key now (a takeover after a lapsed lease). */
const takenOver = (backend: ReturnType<typeof createTestStore>) => {
  const [id, record] = [...backend.records][0] as [string, IdempotencyRecord];
  backend.records.set(id, { ...record, owner: 'someone-else' });
};

const ends = (execution: { state: ExecutionState }, state: ExecutionState) =>
  expect(execution.state).toBe(state);

const leasedWalks: Record<keyof typeof LEASED, () => Promise<void>> = {
  async finalize() {
    const { execution, idem } = await leased();
    expect(await execution.finish(created())).toBe('finalized');
    ends(execution, 'settled');
    expectReplay(await idem.begin(post()));
  },
  async release() {
    const { execution, backend } = await leased();
    expect(await execution.finish(released)).toBe('released');
    ends(execution, 'settled');
    expect(backend.records.size).toBe(0);
  },
  async abort() {
    const { execution, backend, events } = await leased();
    await execution.abort();
    ends(execution, 'settled');
    expect(backend.records.size).toBe(0);
    expect(events.at(-1)).toMatchObject({ type: 'released', reason: 'aborted' });
  },
  async 'lose-lease'() {
    const { execution, backend, events } = await leased({ heartbeatIntervalMs: 10 });
    takenOver(backend);
    await lost(execution);
    expect(execution.signal.aborted).toBe(true);
    expect(events.at(-1)).toMatchObject({ type: 'lease-lost', phase: 'heartbeat' });
    // What it answers is still offered to the store, owner-fenced: the store says it is lost.
    expect(await execution.finish(created())).toBe('lease-lost');
    ends(execution, 'settled');
    expect(backend.only()?.owner).toBe('someone-else');
  },
  async write() {
    const { execution, backend, events } = await leased();
    const write = (params: Parameters<TransactionalStore['finalize']>[0]) => backend.store.finalize(params);
    expect(await execution.finalizeWith(created(), inTransaction(write))).toBe('finalized');
    ends(execution, 'written');
    // Not durable until the answer that goes out says the transaction committed.
    expect(events.filter((e) => e.type === 'finalized')).toEqual([]);
  },
  async 'lost-at-write'() {
    const { execution, events } = await leased();
    expect(
      await execution.finalizeWith(
        created(),
        inTransaction(() => false),
      ),
    ).toBe('lease-lost');
    ends(execution, 'settled');
    expect(events.at(-1)).toMatchObject({ type: 'lease-lost', phase: 'finalize' });
  },
  async 'write-threw'() {
    const { execution } = await leased();
    const broken = inTransaction(() => {
      throw new Error('connection lost');
    });
    await expect(execution.finalizeWith(created(), broken)).rejects.toThrow('connection lost');
    ends(execution, 'write-failed');
  },
  async commit() {
    const { execution, backend, events } = await leased();
    await execution.finalizeWith(
      created(),
      inTransaction((params) => backend.store.finalize(params)),
    );
    expect(await execution.finish(created())).toBe('finalized');
    ends(execution, 'settled');
    expect(events.at(-1)).toMatchObject({ type: 'finalized', external: true, status: 201 });
  },
  async 'roll-back'() {
    // Written in a transaction that then failed (nothing kept): the other answer releases the key.
    const { execution, backend } = await leased();
    await execution.finalizeWith(
      created(),
      inTransaction(() => true),
    );
    expect(await execution.finish(released)).toBe('released');
    ends(execution, 'settled');
    expect(backend.records.size).toBe(0);
    // And from a write that threw, whatever the answer: nothing was written, nothing is durable.
    const again = await leased();
    const broken = inTransaction(() => {
      throw new Error('connection lost');
    });
    await expect(again.execution.finalizeWith(created(), broken)).rejects.toThrow();
    expect(await again.execution.finish(created())).toBe('released');
    ends(again.execution, 'settled');
  },
  async hold() {
    const { execution, backend, events, idem } = await leased({ heartbeatIntervalMs: 10 });
    execution.hold('the commit did not answer');
    ends(execution, 'settled');
    expect(events.at(-1)).toMatchObject({ type: 'held', reason: 'the commit did not answer' });
    const calls = backend.calls.length;
    // Neither stored nor released, and no longer renewed: later answers change nothing, and the key is in flight.
    expect(await execution.finish(created())).toBe('already-settled');
    await execution.abort();
    await new Promise((resolve) => setTimeout(resolve, 40));
    expect(backend.calls.slice(calls).filter((call) => call !== 'reserve')).toEqual([]);
    expect(backend.only()).toMatchObject({ owner: execution.owner, response: null });
    expect((await idem.begin(post())).action).toBe('reject');
    // From a write whose commit is unknown too.
    const written = await leased();
    await written.execution.finalizeWith(
      created(),
      inTransaction(() => true),
    );
    written.execution.hold('the commit did not answer');
    ends(written.execution, 'settled');
    expect(await written.execution.finish(created())).toBe('already-settled');
  },
  async 'abort-after-write'() {
    const { execution, backend, events } = await leased();
    await execution.finalizeWith(
      created(),
      inTransaction(() => true),
    );
    await execution.abort();
    ends(execution, 'settled');
    expect(backend.records.size).toBe(0);
    expect(events.at(-1)).toMatchObject({ type: 'released', reason: 'aborted' });
  },
};

const transactionalWalks: Record<keyof typeof TRANSACTIONAL, () => Promise<void>> = {
  async reserve() {
    const { execution, backend, events } = await reservedInTransaction();
    ends(execution, 'reserved');
    expect(backend.only()?.owner).toBe(execution.owner);
    expect(events.at(-1)).toMatchObject({ type: 'reserved', tookOver: false });
  },
  async 'answer-instead'() {
    const { idem, backend } = setup({ reserveIn: 'transaction' });
    const first = expectPending(await idem.begin(post()));
    await first.reserveWith(transaction(backend).store);
    await first.finish(created());
    // A retry: its key is answered already.
    const retry = expectPending(await idem.begin(post()));
    const answer = await retry.reserveWith(transaction(backend).store);
    expect(answer.action).toBe('replay');
    ends(retry, 'settled');
    expect(await retry.finish(created())).toBe('already-settled');
    // Another request under the key: refused, settled the same way.
    const other = expectPending(await idem.begin(post({ body: { item: 'pen' } })));
    const refusal = await other.reserveWith(transaction(backend).store);
    expect(refusal.action === 'reject' && refusal.error.status).toBe(422);
    ends(other, 'settled');
  },
  async 'never-reserved'() {
    const { execution, backend } = await pending();
    expect(await execution.finish({ status: 400, headers: {}, body: null })).toBe('not-reserved');
    ends(execution, 'settled');
    expect(backend.calls).toEqual([]);
  },
  async 'abort-pending'() {
    const { execution, backend } = await pending();
    await execution.abort();
    ends(execution, 'settled');
    expect(backend.calls).toEqual([]);
  },
  async write() {
    const { execution, tx } = await reservedInTransaction();
    expect(await execution.finalizeWith(created(), tx.store)).toBe('finalized');
    ends(execution, 'written');
  },
  async 'release-in-transaction'() {
    const { execution, tx, backend, events } = await reservedInTransaction();
    expect(await execution.finalizeWith(released, tx.store)).toBe('not-stored');
    ends(execution, 'settled');
    expect(backend.records.size).toBe(0); // released in the transaction: the retry runs
    expect(events.at(-1)).toMatchObject({ type: 'released', reason: 'status', status: 503 });
  },
  async 'lost-at-write'() {
    const { execution, tx } = await reservedInTransaction();
    const lostStore = { ...tx.store, finalize: () => false };
    expect(await execution.finalizeWith(created(), lostStore)).toBe('lease-lost');
    ends(execution, 'settled');
  },
  async 'write-threw'() {
    const { execution, tx } = await reservedInTransaction();
    const broken = {
      ...tx.store,
      finalize: () => {
        throw new Error('current transaction is aborted');
      },
    };
    await expect(execution.finalizeWith(created(), broken)).rejects.toThrow('aborted');
    ends(execution, 'write-failed');
  },
  async 'store-after-rollback'() {
    // The work refused deterministically (a 409), the transaction rolled back with the reservation, and the
    // 409 is the answer: stored outside the transaction, reserved afresh, so the retry replays it.
    const { execution, tx, backend, idem } = await reservedInTransaction();
    tx.rollBack();
    expect(backend.records.size).toBe(0);
    const conflict: CapturedResponse = { status: 409, headers: {}, body: '{"error":"changed"}' };
    expect(await execution.finish(conflict)).toBe('finalized');
    ends(execution, 'settled');
    expect(backend.calls.slice(-3)).toEqual(['finalize', 'reserve', 'finalize']);
    const retry = expectPending(await idem.begin(post()));
    const answer = await retry.reserveWith(transaction(backend).store);
    expect(answer.action === 'replay' && answer.response.status).toBe(409);
  },
  async release() {
    const { execution, tx, backend } = await reservedInTransaction();
    tx.rollBack(); // the transaction failed with a fault; the answer is a 503
    expect(await execution.finish(released)).toBe('released');
    ends(execution, 'settled');
    expect(backend.records.size).toBe(0);
  },
  async abort() {
    const { execution, backend } = await reservedInTransaction();
    await execution.abort();
    ends(execution, 'settled');
    expect(backend.records.size).toBe(0);
  },
  async commit() {
    const { execution, tx, events, idem, backend } = await reservedInTransaction();
    await execution.finalizeWith(created(), tx.store);
    expect(await execution.finish(created())).toBe('finalized');
    ends(execution, 'settled');
    expect(events.at(-1)).toMatchObject({ type: 'finalized', external: true });
    const retry = expectPending(await idem.begin(post()));
    expect((await retry.reserveWith(transaction(backend).store)).action).toBe('replay');
  },
  async 'roll-back'() {
    const { execution, tx, backend, events } = await reservedInTransaction();
    await execution.finalizeWith(created(), tx.store);
    tx.rollBack(); // the commit failed: the reservation went with it
    expect(await execution.finish(released)).toBe('released');
    ends(execution, 'settled');
    expect(backend.records.size).toBe(0);
    // Nothing was durable, so nothing says it was.
    expect(events.filter((e) => e.type === 'finalized')).toEqual([]);
    expect(events.at(-1)).toMatchObject({ type: 'released', reason: 'aborted', status: 503 });
  },
  async 'abort-after-write'() {
    const { execution, tx } = await reservedInTransaction();
    await execution.finalizeWith(created(), tx.store);
    await execution.abort();
    ends(execution, 'settled');
  },
};

describe('the leased lifecycle (reserveIn: begin): every transition', () => {
  test.each(Object.keys(LEASED))('%s', (name) => leasedWalks[name as keyof typeof LEASED]());

  test('every transition ends where the table says', () => {
    expect(LEASED.finalize.to).toBe('settled');
    for (const transition of Object.values(LEASED)) expect(transition.from.length).toBeGreaterThan(0);
  });
});

describe('the transactional lifecycle (reserveIn: transaction): every transition', () => {
  test.each(Object.keys(TRANSACTIONAL))('%s', (name) =>
    transactionalWalks[name as keyof typeof TRANSACTIONAL](),
  );
});

describe('design.md shows the tables as the code has them', () => {
  const design = readFileSync(new URL('../../../docs/design.md', import.meta.url), 'utf8');
  const row = (name: string, { from, on, to, does }: (typeof LEASED)[keyof typeof LEASED]) =>
    `| \`${name}\` | ${from.map((state) => `\`${state}\``).join(', ')} | \`${on}\` | \`${to}\` | ${does} |`;
  test.each([
    ['leased', LEASED],
    ['transactional', TRANSACTIONAL],
  ] as const)('%s', (_name, table) => {
    for (const [name, transition] of Object.entries(table)) expect(design).toContain(row(name, transition));
  });
});

describe('calls that are no transition', () => {
  test('settled: every later call answers already-settled and touches nothing', async () => {
    const { execution, backend } = await leased();
    await execution.finish(created());
    const calls = backend.calls.length;
    expect(await execution.finish(created())).toBe('already-settled');
    await execution.abort();
    expect(
      await execution.finalizeWith(
        created(),
        inTransaction(() => true),
      ),
    ).toBe('lease-lost');
    expect(backend.calls.length).toBe(calls);
    ends(execution, 'settled');
  });

  test('a leased execution cannot reserve in a transaction; a pending one cannot finalize before it reserves', async () => {
    const { execution } = await leased();
    const asTransactional = execution as unknown as TransactionalExecution;
    await expect(asTransactional.reserveWith(inTransaction(() => true))).rejects.toThrow('reserved already');
    const waiting = await pending();
    await expect(
      waiting.execution.finalizeWith(
        created(),
        inTransaction(() => true),
      ),
    ).rejects.toThrow('reserveWith first');
    ends(waiting.execution, 'pending');
  });

  test('a leased finalizeWith of a status the rule releases writes nothing and stays reserved', async () => {
    const { execution, backend } = await leased();
    expect(
      await execution.finalizeWith(
        released,
        inTransaction(() => true),
      ),
    ).toBe('not-stored');
    ends(execution, 'reserved');
    expect(await execution.finish(released)).toBe('released');
    expect(backend.records.size).toBe(0);
  });

  test('a reserveWith whose store fails stays pending: the fault is thrown for the host’s transaction', async () => {
    const { execution, events } = await pending();
    const failing = {
      ...inTransaction(() => true),
      reserve: () => Promise.reject(new Error('connection reset')),
    };
    await expect(execution.reserveWith(failing)).rejects.toThrow('connection reset');
    ends(execution, 'pending');
    expect(events.at(-1)).toMatchObject({ type: 'store-error', operation: 'reserve', failedOpen: false });
  });
});

describe('store-after-rollback, when a duplicate took the key in between', () => {
  test('the refusal is not stored, the outcome is lease-lost, and its event closes the reservation', async () => {
    // The work refused, the transaction rolled back with the reservation; a duplicate that waited on the row
    // reserved the key before this request's refusal could be stored.
    const { execution, tx, backend, idem, events } = await reservedInTransaction();
    tx.rollBack();
    const duplicate = expectPending(await idem.begin(post()));
    expect(await duplicate.reserveWith(transaction(backend).store)).toEqual({ action: 'execute' });
    const conflict: CapturedResponse = { status: 409, headers: {}, body: '{"error":"changed"}' };
    expect(await execution.finish(conflict)).toBe('lease-lost');
    ends(execution, 'settled');
    expect(backend.only()?.owner).toBe(duplicate.owner);
    expect(backend.only()?.response).toBeNull();
    expect(events.at(-1)).toMatchObject({
      type: 'lease-lost',
      phase: 'finalize',
      owner: execution.owner,
      status: 409,
    });
  });
});
