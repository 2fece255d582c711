import type { FastifyReply, FastifyRequest } from 'fastify';
import { badRequest } from '../catalog/iceberg-error.js';
import { MAX_TABLE_CHANGES } from '../catalog/limits.js';
import {
  commitTables,
  removeFiles,
  type TableCommit,
  tableKey,
  type WrittenCommit,
} from '../catalog/table-commit.js';
import type { Warehouse } from '../catalog/warehouse.js';
import type { CatalogDatabase } from '../database/catalog-database.js';
import { type Answer, metadataAnswer } from '../http/answer.js';
import { mutate } from '../idempotency/mutate.js';
import { body, checkUpdateCount, identifier, namespaceOf, type Params } from './parse.js';

/** A commit of one or more tables, as a handler hands it on. */
interface CommitRequest {
  readonly reply: FastifyReply;
  readonly db: CatalogDatabase;
  readonly warehouse: Warehouse;
  /** The catalog prefix ('' without one). */
  readonly prefix: string;
  readonly commits: readonly TableCommit[];
  /** The answer, from each table's commit in the request's order. */
  readonly answer: (changes: readonly WrittenCommit[]) => Answer;
}

/**
 * Commit the tables as the request's mutation (catalog/table-commit.ts says how): inside its transaction,
 * after its key is reserved there, so that a retry of a commit that went through replays it rather than meet
 * its own change. Once it has committed, the metadata files that fell out of the log are deleted.
 */
async function commit({ reply, db, warehouse, prefix, commits, answer }: CommitRequest) {
  let expired: readonly string[] = [];
  return mutate(
    reply,
    db,
    async (tx) => {
      const committed = await commitTables({ tx, warehouse, prefix, commits });
      expired = committed.expired;
      return answer(committed.changes);
    },
    () =>
      removeFiles(warehouse, expired, (error, file) =>
        reply.request.log.warn({ err: error, file }, 'old metadata file not deleted'),
      ),
  );
}

/** POST /namespaces/{namespace}/tables/{table}: one table's commit; answers the new metadata. */
export function commitTableHandler(db: CatalogDatabase, warehouse: Warehouse) {
  return async (request: FastifyRequest, reply: FastifyReply) => {
    const { prefix, parts } = namespaceOf(request);
    const name = (request.params as Params).table as string;
    const input = body(request);
    checkUpdateCount(input, 'the commit');
    return commit({
      reply,
      db,
      warehouse,
      prefix,
      commits: [{ id: { namespace: parts, name }, input }],
      // One commit, one change.
      answer: (changes) => {
        const [change] = changes as [WrittenCommit];
        return metadataAnswer(change.metadataLocation, change.next, change.text);
      },
    });
  };
}

/** POST /transactions/commit: several tables' commits, all or none. */
export function commitTransactionHandler(db: CatalogDatabase, warehouse: Warehouse) {
  return async (request: FastifyRequest, reply: FastifyReply) => {
    const { prefix = '' } = request.params as Params;
    const input = body(request);
    const changes = input['table-changes'];
    if (!Array.isArray(changes)) throw badRequest('table-changes must be an array');
    // Shape checks, before the key is reserved: each change is a table read locked, checked and rewritten in
    // the one transaction, so their number is bounded, and a table named twice would be checked against a
    // state its own first change replaces (and write a file per naming).
    if (changes.length > MAX_TABLE_CHANGES)
      throw badRequest(`table-changes must have at most ${MAX_TABLE_CHANGES} changes, got ${changes.length}`);
    const seen = new Set<string>();
    const commits = changes.map((change, i): TableCommit => {
      const table = change as Record<string, unknown>;
      const commit = { id: identifier(table?.identifier, `table-changes[${i}].identifier`), input: table };
      const key = tableKey(commit);
      if (seen.has(key))
        throw badRequest(
          `table-changes[${i}] names ${[...commit.id.namespace, commit.id.name].join('.')} again`,
        );
      seen.add(key);
      checkUpdateCount(table, `table-changes[${i}]`);
      return commit;
    });
    return commit({ reply, db, warehouse, prefix, commits, answer: () => ({ status: 204 }) });
  };
}
