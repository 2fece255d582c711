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
  const answer = await db.transaction(async (tx) => {
    const result = await work(tx);
    const finalized = await request.idempotency?.finalizeWith(render(result), (params) =>
      tx.finalize(params),
    );
    if (finalized === 'lease-lost')
      throw retryLater('the idempotency reservation was lost before commit; retry with the same key');
    return result;
  });
  await afterCommit?.();
  return send(reply, answer);
}
