import { executionOf } from '@idem/adapter-fastify';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { CatalogDatabase, Executor } from '../db.js';
import { retryLater } from '../errors.js';
import { stringifyExactJson } from '../exact-json.js';

/** A catalog answer: a status and an optional JSON body, sent exactly as it is stored for replay. */
export interface Answer {
  readonly status: number;
  readonly body?: unknown;
}

const JSON_TYPE = 'application/json';

function render(answer: Answer) {
  // Longs as exact digits: the stored replay carries the very text the first answer had.
  const body = answer.body === undefined ? null : stringifyExactJson(answer.body);
  return { status: answer.status, headers: body === null ? {} : { 'content-type': JSON_TYPE }, body };
}

export function send(reply: FastifyReply, answer: Answer) {
  const { status, headers, body } = render(answer);
  reply.code(status).headers(headers);
  return body === null ? reply.send() : reply.send(body);
}

/**
 * Run a catalog mutation in one database transaction together with the idempotency record: the change and the
 * stored answer commit together or not at all. When the fenced finalize finds the reservation lost (another
 * node took the key over after our lease lapsed), the change is rolled back and the answer is a retryable 503,
 * so the work is never committed twice.
 */
export async function mutate(
  request: FastifyRequest,
  reply: FastifyReply,
  db: CatalogDatabase,
  work: (tx: Executor) => Promise<Answer>,
  /** Runs once the transaction has committed, before the answer goes out (a purge); must not throw. */
  afterCommit?: () => Promise<void>,
) {
  const execution = executionOf(request);
  const answer = await db.transaction(async (tx) => {
    const result = await work(tx);
    const stored = execution?.prepare(render(result));
    if (execution !== undefined && stored !== undefined) {
      const finalized = await tx.finalize({
        scope: execution.scope,
        key: execution.key,
        owner: execution.owner,
        response: stored,
        nowMs: Date.now(),
      });
      if (!finalized)
        throw retryLater('the idempotency reservation was lost before commit; retry with the same key');
    }
    return result;
  });
  if (execution !== undefined && execution.prepare(render(answer)) !== undefined)
    execution.markFinalized(answer.status);
  await afterCommit?.();
  return send(reply, answer);
}
