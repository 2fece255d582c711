import { describe, expect, test } from 'vitest';
import {
  CommitOutcomeUnknown,
  DatabaseTimeout,
  NO_DEADLINE,
  type PooledConnection,
  transactionOn,
} from '../src/database/deadline.js';
import type { Executor } from '../src/database/executor.js';
import { toIcebergError } from '../src/http/errors.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A pooled connection whose end of a transaction (COMMIT, ROLLBACK) takes `endMs`. */
function slowEnd(endMs: number) {
  const state = { committed: false, rolledBack: false, destroyed: false, released: false };
  const connection: PooledConnection = {
    executor: { idempotency: {} } as Executor,
    prepare: async () => {},
    begin: async () => {},
    commit: async () => {
      await sleep(endMs);
      state.committed = true;
    },
    rollback: async () => {
      await sleep(endMs);
      state.rolledBack = true;
    },
    release: () => {
      state.released = true;
    },
    destroy: () => {
      state.destroyed = true;
    },
  };
  const run = <T>(body: (tx: Executor) => Promise<T>, deadline = NO_DEADLINE) =>
    transactionOn(async () => connection, bounds, deadline, body);
  return { run, state };
}

const bounds = { acquireTimeoutMs: 1_000, statementTimeoutMs: 20, serverTimeoutMs: 20 };

describe('a transaction whose end does not answer in time', () => {
  test('a COMMIT past the deadline is of unknown outcome: 500 CommitStateUnknownException, never a retryable 503', async () => {
    const { run, state } = slowEnd(80);
    const error = await run(async () => 'new metadata').then(
      () => undefined,
      (thrown: unknown) => thrown,
    );
    expect(error).toBeInstanceOf(CommitOutcomeUnknown);
    const answer = toIcebergError(error);
    expect(answer.code).toBe(500);
    expect(answer.type).toBe('CommitStateUnknownException');
    await sleep(100);
    expect(state.committed).toBe(true); // it did commit: a 503 would have invited a second run
  });

  test('a ROLLBACK past the deadline committed nothing: the retryable 503', async () => {
    const { run, state } = slowEnd(80);
    const error = await run(async () => {
      throw new Error('the work failed');
    }).then(
      () => undefined,
      (thrown: unknown) => thrown,
    );
    expect(error).toBeInstanceOf(DatabaseTimeout);
    expect(toIcebergError(error).code).toBe(503);
    await sleep(100);
    expect(state.rolledBack).toBe(true);
  });

  test('an end within the deadline is the body’s own result', async () => {
    const { run } = slowEnd(1);
    await expect(run(async () => 'done')).resolves.toBe('done');
  });

  test('a COMMIT still unanswered at the request’s deadline (shorter than the statement bound) is of unknown outcome, its connection destroyed', async () => {
    const { state } = slowEnd(80);
    const connection = {
      executor: { idempotency: {} } as Executor,
      prepare: async () => {},
      begin: async () => {},
      commit: async () => void (await sleep(400)),
      rollback: async () => {},
      release: () => {
        state.released = true;
      },
      destroy: () => {
        state.destroyed = true;
      },
    };
    const startedMs = performance.now();
    const error = await transactionOn(
      async () => connection,
      { acquireTimeoutMs: 1_000, statementTimeoutMs: 1_000, serverTimeoutMs: 1_000 },
      performance.now() + 60,
      async () => 'new metadata',
    ).then(
      () => undefined,
      (thrown: unknown) => thrown,
    );
    expect(error).toBeInstanceOf(CommitOutcomeUnknown);
    expect(performance.now() - startedMs).toBeLessThan(200);
    expect(state.destroyed).toBe(true);
    expect(state.released).toBe(false);
  });

  test('a body that ends past the deadline is not committed: the retryable 503, nothing unknown', async () => {
    const { run, state } = slowEnd(1);
    const error = await run(async () => {
      await sleep(60);
      return 'too late';
    }, performance.now() + 30).then(
      () => undefined,
      (thrown: unknown) => thrown,
    );
    expect(error).toBeInstanceOf(DatabaseTimeout);
    expect(toIcebergError(error).code).toBe(503);
    expect(state.committed).toBe(false);
    expect(state.destroyed).toBe(true); // the database rolls the transaction back as the connection closes
  });

  test('a connection that comes after the deadline runs nothing and goes back to the pool unused', async () => {
    const { state } = slowEnd(1);
    let ran = false;
    const connection = {
      executor: { idempotency: {} } as Executor,
      prepare: async () => {},
      begin: async () => {},
      commit: async () => {},
      rollback: async () => {},
      release: () => {
        state.released = true;
      },
      destroy: () => {
        state.destroyed = true;
      },
    };
    const error = await transactionOn(
      () => sleep(80).then(() => connection),
      { acquireTimeoutMs: 1_000, statementTimeoutMs: 1_000, serverTimeoutMs: 1_000 },
      performance.now() + 30,
      async () => {
        ran = true;
      },
    ).then(
      () => undefined,
      (thrown: unknown) => thrown,
    );
    expect(error).toBeInstanceOf(DatabaseTimeout);
    await sleep(100);
    expect(ran).toBe(false);
    expect(state.released).toBe(true);
    expect(state.destroyed).toBe(false);
  });
});
