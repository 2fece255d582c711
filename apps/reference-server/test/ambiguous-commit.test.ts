import { describe, expect, test } from 'vitest';
import { boundedTransaction, CommitOutcomeUnknown, DatabaseTimeout } from '../src/database/deadline.js';
import type { Executor } from '../src/database/executor.js';
import { toIcebergError } from '../src/http/errors.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A driver transaction whose end (COMMIT after a body that resolved, ROLLBACK after one that threw) takes `endMs`. */
function slowEnd(endMs: number) {
  const state = { committed: false, rolledBack: false };
  const run = async <T>(body: (tx: Executor) => Promise<T>): Promise<T> => {
    try {
      const result = await body({} as Executor);
      await sleep(endMs);
      state.committed = true;
      return result;
    } catch (error) {
      await sleep(endMs);
      state.rolledBack = true;
      throw error;
    }
  };
  return { run, state };
}

const bounds = { acquireTimeoutMs: 1_000, endTimeoutMs: 20 };

describe('a transaction whose end does not answer in time', () => {
  test('a COMMIT past the deadline is of unknown outcome: 500 CommitStateUnknownException, never a retryable 503', async () => {
    const { run, state } = slowEnd(80);
    const error = await boundedTransaction(run, async () => 'new metadata', bounds).then(
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
    const error = await boundedTransaction(
      run,
      async () => {
        throw new Error('the work failed');
      },
      bounds,
    ).then(
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
    await expect(boundedTransaction(run, async () => 'done', bounds)).resolves.toBe('done');
  });
});
