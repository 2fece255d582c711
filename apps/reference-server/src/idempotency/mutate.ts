import { sendReplay } from '@idem/adapter-fastify';
import type { Execution, TransactionalExecution } from '@idem/core';
import { sql } from 'drizzle-orm';
import type { FastifyReply } from 'fastify';
import { IcebergError, retryLater } from '../catalog/iceberg-error.js';
import type { CatalogDatabase } from '../database/catalog-database.js';
import { CommitOutcomeUnknown } from '../database/deadline.js';
import type { Executor } from '../database/executor.js';
import { type Answer, render, sendRendered } from '../http/answer.js';
import { toIcebergError } from '../http/errors.js';
import { storedAnswer } from './stored-answer.js';

/**
 * The answer of `work` under a reserved key, a refusal it throws included (a 409 when the table changed, a 404):
 * the work is undone to a savepoint and the refusal is answered and finalized in the transaction like any
 * answer. So the key's record commits with the answer the client gets, or the client gets a retryable 503;
 * a refusal is never sent first and stored after, when the key may belong to another request already.
 * Faults (5xx) roll the whole transaction back, the reservation with it.
 */
async function answerOf(tx: Executor, work: (tx: Executor) => Promise<Answer>): Promise<Answer> {
  await tx.run(sql`SAVEPOINT catalog_work`);
  try {
    return await work(tx);
  } catch (error) {
    const refusal = error instanceof IcebergError ? error : toIcebergError(error);
    if (refusal.code >= 500) throw error;
    await tx.run(sql`ROLLBACK TO SAVEPOINT catalog_work`);
    return { status: refusal.code, body: refusal.toJSON() };
  }
}

/**
 * The request's execution, reserved in the mutation's transaction: the plugin reserves keys there
 * (`reserveIn: 'transaction'`, plugin.ts), so a leased one is a plugin set up otherwise, refused as a fault.
 */
function inTransaction<Host>(
  execution: Execution<Host> | undefined,
): TransactionalExecution<Host> | undefined {
  if (execution === undefined || execution.lifecycle === 'transactional') return execution;
  throw new Error(
    'the idempotency plugin reserved the key before the mutation: reserveIn must be "transaction"',
  );
}

/**
 * Run the catalog mutation of `reply.request` in one database transaction together with its idempotency
 * record, and send its answer on `reply`: the key is reserved there first (a duplicate waits on its row until
 * this transaction ends, then replays), the change is made, and the answer is finalized; all commit together,
 * or nothing does. A key held by another request, or used for another one, answers without running `work`.
 */
export async function mutate(
  reply: FastifyReply,
  db: CatalogDatabase,
  work: (tx: Executor) => Promise<Answer>,
  /** Runs once the transaction has committed, before the answer goes out (a purge); must not throw. */
  afterCommit?: () => Promise<void>,
) {
  const { request } = reply;
  const execution = inTransaction(request.idempotency);
  const outcome = await db
    .transaction(async (tx) => {
      // A replay is rebuilt from the catalog as it is now (replay.ts), read in this same transaction.
      request.transaction = tx;
      const reservation = await execution?.reserveWith(tx.idempotency);
      // A refusal rolls back: after a lock wait that ran out, PostgreSQL accepts nothing more in it anyway.
      if (reservation?.action === 'reject') throw reservation.error;
      if (reservation?.action === 'replay') return reservation;
      const answer = execution === undefined ? await work(tx) : await answerOf(tx, work);
      // Rendered once (metadata can be megabytes), for the client and for the record.
      const rendered = render(answer);
      if (
        execution !== undefined &&
        (await execution.finalizeWith(
          storedAnswer(answer, rendered, execution.maxBodyBytes),
          tx.idempotency,
        )) === 'lease-lost'
      )
        throw retryLater('the idempotency reservation was lost before commit; retry with the same key');
      return { action: 'answer' as const, rendered };
    }, request.deadline)
    .catch((error: unknown) => {
      // With a key, a commit of unknown outcome is safe to retry: the retry replays what committed (the answer
      // committed with the work) or runs what did not. Without one it stays CommitStateUnknown (500).
      if (execution !== undefined && error instanceof CommitOutcomeUnknown)
        throw retryLater('the database did not confirm the commit in time; retry with the same key');
      throw error;
    })
    .finally(() => {
      request.transaction = undefined;
    });
  // Replayed through the adapter, as the plugin replays: one writer of replays.
  if (outcome.action === 'replay') return sendReplay(reply, outcome.response);
  await afterCommit?.();
  return sendRendered(reply, outcome.rendered);
}
