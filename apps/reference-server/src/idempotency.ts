import { fastifyIdempotency } from '@idem/adapter-fastify';
import type { IdemError, IdempotencyEventListener, StoredResponse } from '@idem/core';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { MAX_STORED_JSON_DEPTH } from './catalog/limits.js';
import { getEntityByUuid } from './catalog/repository.js';
import type { ServerConfig } from './config.js';
import type { CatalogDatabase } from './db.js';
import { parseExactJson, stringifyExactJson } from './exact-json.js';
import { errorTypeOf } from './http/errors.js';

/** Table and view config handed to clients with every load result (storage settings, credentials). */
const tableConfig = (): Record<string, string> => ({});

/** A stored JSON load result (one with `metadata`, `metadata-location` and `config`), parsed; else undefined. */
function loadResultOf(response: StoredResponse): Record<string, unknown> | undefined {
  if (response.body === null || !String(response.headers['content-type']).startsWith('application/json'))
    return undefined;
  // Exact, both ways: a load result's metadata holds 64-bit snapshot ids.
  const result = parseExactJson(Buffer.from(response.body).toString(), { maxDepth: MAX_STORED_JSON_DEPTH });
  if (typeof result !== 'object' || result === null || !('metadata' in result) || !('config' in result))
    return undefined;
  return result as Record<string, unknown>;
}

/** Rewrite a load result; other answers stay as they are. */
function withBody(
  response: StoredResponse,
  rewrite: (result: Record<string, unknown>) => object,
): StoredResponse {
  const result = loadResultOf(response);
  return result === undefined
    ? response
    : { ...response, body: Buffer.from(stringifyExactJson(rewrite(result))) };
}

/** The table-uuid or view-uuid of a stored load result, if it is one. */
function loadResultUuid(response: StoredResponse): string | undefined {
  const metadata = loadResultOf(response)?.metadata as Record<string, unknown> | undefined;
  const value = metadata?.['table-uuid'] ?? metadata?.['view-uuid'];
  return typeof value === 'string' ? value : undefined;
}

/** The catalog prefix of a request ('' without one): keys are scoped to prefix + principal. */
const prefixOf = (request: FastifyRequest): string => (request.params as { prefix?: string }).prefix ?? '';

/**
 * The idempotency plugin, as the catalog uses it. Registered after schema validation's place in the request
 * (its preHandler runs after it), so that malformed input never reserves a key.
 */
export async function registerIdempotency(
  app: FastifyInstance,
  config: ServerConfig,
  db: CatalogDatabase,
  onEvent: readonly IdempotencyEventListener[] = [],
) {
  await app.register(fastifyIdempotency, {
    store: db.store,
    onEvent, // metrics, traces and the audit log (src/observability)
    keyFormat: 'uuidv7',
    lifetimeMs: config.idempotency.lifetimeMs,
    graceMs: config.idempotency.graceMs,
    leaseMs: config.idempotency.leaseMs,
    methods: ['POST', 'DELETE'],
    // Each mutation reserves its key in its own catalog transaction (routes/respond.ts): one transaction per
    // request, duplicates wait on the record's row, and a crash rolls the reservation back.
    reserveIn: 'transaction',
    // The spec declares 400, not 422, for every operation; Iceberg's Java client retries 503 with the same
    // key, and reads 409 as AlreadyExists / CommitFailed.
    statuses: { keyReused: 400, inProgress: 503 },
    inFlight: { strategy: 'wait', maxWaitMs: config.idempotency.maxWaitMs, timeoutStatus: 503 },
    scope: (request) => `${prefixOf(request)}\u001f${request.principal}`,
    // A load result's `config` is where a catalog vends storage credentials: it is stored empty, and a
    // replay gets the config that holds now.
    redact: (response) => withBody(response, (result) => ({ ...result, config: {} })),
    // A replayed load result (create, register, replace) shows the table or view as it is now, as the spec
    // allows ("an equivalent final response ... may reflect a newer state"), found by its UUID.
    rebuildReplay: async (stored, { host }) => {
      const uuid = loadResultUuid(stored);
      // Inside the mutation's transaction when the key was met there (reserveIn 'transaction'): read in it.
      const current =
        uuid === undefined ? undefined : await getEntityByUuid(host.transaction ?? db, prefixOf(host), uuid);
      return withBody(stored, (result) => ({
        ...result,
        ...(current === undefined
          ? {}
          : { 'metadata-location': current.metadataLocation, metadata: current.metadata }),
        config: tableConfig(),
      }));
    },
    // By status: a 400 of the idempotency layer (an invalid or reused key, a value the store cannot hold) is a
    // BadRequestException like any other.
    formatError: (error: IdemError) => ({
      error: { message: error.message, type: errorTypeOf(error.status), code: error.status },
    }),
  });
}
