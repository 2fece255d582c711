import { sendReplay } from '@idem/adapter-fastify';
import type { LeasedExecution, TransactionalExecution, WholeResponse } from '@idem/core';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { IcebergError, retryLater } from '../catalog/iceberg-error.js';
import type { CatalogDatabase } from '../database/catalog-database.js';
import { CommitOutcomeUnknown } from '../database/deadline.js';
import type { Executor } from '../database/executor.js';
import { type Answer, render, sendRendered } from '../http/answer.js';
import { toIcebergError } from '../http/errors.js';
import type { LeaseControl } from './lease.js';
import { storedAnswer } from './stored-answer.js';

/** A refusal of the keyed work (a 409 when the table changed, a 404): thrown out of the transaction, which rolls back. */
class Refused {
  constructor(readonly answer: Answer) {}
}

/**
 * `work` under a reserved key: its answer, or a refusal it throws carried out as {@link Refused}, so that the
 * transaction rolls back everything (the reservation with it: no savepoint, no statement for it) and the refusal
 * is stored after, before it is sent ({@link storeRefusal}). Faults (5xx) are thrown as they are.
 */
async function refusing(tx: Executor, work: (tx: Executor) => Promise<Answer>): Promise<Answer> {
  try {
    return await work(tx);
  } catch (error) {
    const refusal = error instanceof IcebergError ? error : toIcebergError(error);
    if (refusal.code >= 500) throw error;
    throw new Refused({ status: refusal.code, body: refusal.toJSON() });
  }
}

/**
 * Run the catalog mutation of `reply.request` in one database transaction with its idempotency key, and send its
 * answer on `reply`. How the key is held depends on where the records live (IDEMPOTENCY_STORE): in the catalog's
 * own database it is reserved, and its answer finalized, inside the mutation's transaction ({@link inTransaction});
 * in any other store it was reserved under a lease before the handler ran, and is finalized once the
 * transaction has committed ({@link underLease}). A key held by another request, or used for another one,
 * answers without running `work`.
 */
export async function mutate(
  reply: FastifyReply,
  db: CatalogDatabase,
  work: (tx: Executor) => Promise<Answer>,
  /** Runs once the transaction has committed, before the answer goes out (a purge); must not throw. */
  afterCommit?: () => Promise<void>,
) {
  const execution = reply.request.idempotency;
  if (execution?.lifecycle !== 'leased') return inTransaction(reply, db, execution, work, afterCommit);
  const lease = reply.server.idempotencyLease;
  // The plugin reserves at begin only for a leased store, which always comes with its control.
  if (lease === undefined)
    throw new Error('a key was reserved under a lease, but the store has no lease control');
  return underLease(reply, db, execution, lease, work, afterCommit);
}

/**
 * The mutation and its key in one transaction: the key is reserved there first (a duplicate waits on its row
 * until this transaction ends, then replays), the change is made, and the answer is finalized; all commit
 * together, or nothing does. A refusal of the change rolls it all back and is stored after ({@link storeRefusal}).
 */
async function inTransaction(
  reply: FastifyReply,
  db: CatalogDatabase,
  execution: TransactionalExecution<FastifyRequest> | undefined,
  work: (tx: Executor) => Promise<Answer>,
  afterCommit: (() => Promise<void>) | undefined,
) {
  const { request } = reply;
  /** The answer found under the key in this transaction, when it found one: sent however the transaction ends. */
  let replay: { readonly action: 'replay'; readonly response: WholeResponse } | undefined;
  const outcome = await db
    .transaction(async (tx) => {
      // A replay is rebuilt from the catalog as it is now (replay.ts), read in this same transaction.
      request.transaction = tx;
      const reservation = await execution?.reserveWith(tx.idempotency);
      // A refusal rolls back: after a lock wait that ran out, PostgreSQL accepts nothing more in it anyway.
      if (reservation?.action === 'reject') throw reservation.error;
      if (reservation?.action === 'replay') {
        replay = reservation;
        return reservation;
      }
      const answer = execution === undefined ? await work(tx) : await refusing(tx, work);
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
      // A replay read an answer that the request which made it committed, and wrote nothing: whether this
      // transaction's COMMIT answered, or came in time, changes nothing of it. Sent, as the coordinator's
      // `replayed` event (emitted when it was found) already says, rather than a 503 for a retry of a retry.
      if (replay !== undefined) {
        request.log.warn(
          { err: error },
          'the transaction that found a replay did not end; the replay is sent',
        );
        return replay;
      }
      if (error instanceof Refused && execution !== undefined)
        return { action: 'refused' as const, execution, answer: error.answer };
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
  if (outcome.action === 'refused') return storeRefusal(reply, outcome.execution, outcome.answer);
  await afterCommit?.();
  return sendRendered(reply, outcome.rendered);
}

/**
 * A refusal of keyed work whose transaction rolled back, the reservation with it: stored now, the key reserved
 * afresh (`finish` after a rollback), and sent only once it is the key's answer. A duplicate that waited on the
 * reservation's row may have taken the key meanwhile and run the work itself: its answer is the key's, and this
 * request answers a retryable 503, whose retry replays it; so it does when the store fails or the request's deadline
 * comes first. So a refusal is never sent unless stored (or the finalization rule releases its status), and never
 * stored under a key that is another request's.
 */
async function storeRefusal(
  reply: FastifyReply,
  execution: TransactionalExecution<FastifyRequest>,
  answer: Answer,
) {
  const rendered = render(answer);
  // Within the request's deadline, as the transaction was: past it the answer is the retryable 503, and the store
  // calls run on (the retry replays what they stored, or runs again).
  const outcome = await untilDeadline(
    execution.finish(storedAnswer(answer, rendered, execution.maxBodyBytes)),
    reply.request.deadline,
  );
  if (outcome !== 'finalized' && outcome !== 'released')
    throw retryLater('the refusal could not be stored under the idempotency key; retry with the same key');
  return sendRendered(reply, rendered);
}

/** The longest delay a Node timer takes. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** What `work` settles to, or `undefined` once `deadline` (`performance.now()` time) has come first. */
async function untilDeadline<T>(work: Promise<T>, deadline: number): Promise<T | undefined> {
  const leftMs = Math.max(0, deadline - performance.now());
  // No deadline, or one beyond what a timer holds (it would fire at once).
  if (!(leftMs <= MAX_TIMER_MS)) return work;
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<undefined>((resolve) => {
    timer = setTimeout(() => resolve(undefined), leftMs);
  });
  try {
    return await Promise.race([work, late]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * The mutation under a key the store holds under a lease (reserved before the handler, renewed by the
 * heartbeat while it runs): the work in its own catalog transaction, the owner fence just before its commit
 * (`lease.confirm`: a key another request took over after the lease lapsed rolls the work back with a
 * retryable 503), then the answer finalized in the store, owner-fenced, before it goes out. Commit, then
 * finalize: a record never says done for work that did not commit. What that order cannot close:
 *
 * - A refusal of the work (404, 409: the transaction rolls back) is an answer like any other: stored, and sent
 *   only if it was this request's to store (a key taken over meanwhile answers a retryable 503 instead).
 * - A fault (5xx, nothing committed) releases the key with the retryable 503, so the retry runs.
 * - A COMMIT that did not answer may have committed: the key is kept in flight (never released, never
 *   finalized) and the answer is Iceberg's 500 CommitStateUnknownException, which tells the client not to
 *   assume either outcome. A retry with the key waits (503) until the lease lapses, then runs again.
 * - A node that dies between its commit and its finalize (or a store that loses the finalize) leaves the key
 *   in flight too: a retry after the lease runs the work again.
 */
async function underLease(
  reply: FastifyReply,
  db: CatalogDatabase,
  execution: LeasedExecution<FastifyRequest>,
  lease: LeaseControl,
  work: (tx: Executor) => Promise<Answer>,
  afterCommit: (() => Promise<void>) | undefined,
) {
  const { request } = reply;
  let answer: Answer;
  let committed = false;
  try {
    answer = await db.transaction(async (tx) => {
      const done = await work(tx);
      await lease.confirm(execution, request.deadline);
      return done;
    }, request.deadline);
    committed = true;
  } catch (error) {
    if (error instanceof CommitOutcomeUnknown) {
      // Neither stored nor released: a retry must not run the work again at once (it may have committed).
      execution.hold(error.message);
      request.log.warn(
        { key: execution.key },
        'the commit of a keyed mutation was not confirmed: its key stays in flight until its lease lapses',
      );
      const unknown = new IcebergError(
        500,
        'CommitStateUnknownException',
        'the catalog database did not confirm the commit in time: whether the change was applied is unknown ' +
          '(read it back to see); a retry with the same key waits for its lease to lapse, then runs again',
      );
      throw unknown;
    }
    const refusal = toIcebergError(error);
    if (refusal.code >= 500) {
      // Nothing committed: free the key, so that the client's retry runs. Not waited for: with the store down
      // (a fence that timed out) the release would hold the 503 back for another store timeout, and a retry
      // that comes before it lands waits for it (it polls the store).
      void execution.abort();
      throw error;
    }
    answer = { status: refusal.code, body: refusal.toJSON() };
  }
  // Rendered once (metadata can be megabytes), for the client and for the record.
  const rendered = render(answer);
  // The record is written before the answer goes out: a client that has the answer finds it done on any node.
  const outcome = await execution.finish(storedAnswer(answer, rendered, execution.maxBodyBytes));
  // A refusal committed nothing, and the key is another request's now (its lease lapsed and it was taken over):
  // that request's answer is the key's, so this one is not sent (as a refusal in the catalog's transaction is
  // not). Committed work is answered whatever the finalize did: the work is done.
  if (!committed && outcome === 'lease-lost')
    throw retryLater(
      'the idempotency reservation was lost before the answer was stored; retry with the same key',
    );
  if (committed) await afterCommit?.();
  return sendRendered(reply, rendered);
}
