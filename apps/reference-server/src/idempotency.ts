import { fastifyIdempotency } from '@idem/adapter-fastify';
import type { IdemError, IdempotencyEventListener, StoredResponse } from '@idem/core';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { MAX_STORED_JSON_DEPTH } from './catalog/limits.js';
import { getEntityByUuid } from './catalog/repository.js';
import type { Warehouse } from './catalog/warehouse.js';
import type { ServerConfig } from './config.js';
import type { CatalogDatabase } from './database/catalog-database.js';
import { parseExactJson, stringifyExactJson } from './exact-json.js';
import { errorTypeOf } from './http/errors.js';

type Json = Record<string, unknown>;

/** Table and view config handed to clients with every load result (storage settings, credentials). */
const tableConfig = (): Record<string, string> => ({});

/** An answer as mutations render it for the client and for the idempotency record (see routes/respond.ts). */
export interface RenderedAnswer {
  readonly status: number;
  readonly headers: Record<string, string>;
  readonly body: string | null;
}

/**
 * A metadata answer: a LoadTableResult / LoadViewResult (create, register, replace: `config` included) or a
 * CommitTableResponse (commit, unregister: no `config`).
 */
interface MetadataAnswer {
  readonly 'metadata-location': string;
  readonly metadata: Json;
  readonly config?: unknown;
}

const isObject = (value: unknown): value is Json =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

function isMetadataAnswer(value: unknown): value is MetadataAnswer {
  return isObject(value) && typeof value['metadata-location'] === 'string' && isObject(value.metadata);
}

/** The table-uuid or view-uuid of a metadata answer's metadata. */
function uuidOf(metadata: Json): string | undefined {
  const value = metadata['table-uuid'] ?? metadata['view-uuid'];
  return typeof value === 'string' ? value : undefined;
}

/**
 * The stored form of a compact answer: its metadata-location and its metadata's UUID alone. Every TableMetadata
 * and ViewMetadata has a `format-version`; a compact one has none.
 */
const isCompact = (answer: MetadataAnswer) => answer.metadata['format-version'] === undefined;

/**
 * What the idempotency record keeps of an answer. A metadata answer larger than the record holds (the
 * coordinator would keep its status alone, and the replay would be a 200 with no body) is kept compact:
 * its `metadata-location` and its table's or view's UUID, from which `rebuildReplay` makes the replay again.
 * (Not in `redact`: the coordinator has already dropped a body over its cap by the time `redact` sees it.)
 */
export function storedAnswer(answer: { body?: unknown }, rendered: RenderedAnswer, maxBodyBytes: number) {
  if (rendered.body === null || Buffer.byteLength(rendered.body, 'utf8') <= maxBodyBytes) return rendered;
  const { body } = answer;
  if (!isMetadataAnswer(body)) return rendered;
  const uuid = uuidOf(body.metadata);
  const compact = {
    'metadata-location': body['metadata-location'],
    metadata:
      uuid === undefined ? {} : { [body.metadata['view-uuid'] === uuid ? 'view-uuid' : 'table-uuid']: uuid },
    ...('config' in body ? { config: {} } : {}),
  };
  return { ...rendered, body: stringifyExactJson(compact) };
}

/** A stored metadata answer, parsed; else undefined. */
function metadataAnswerOf(response: StoredResponse): MetadataAnswer | undefined {
  if (response.body === null || !String(response.headers['content-type']).startsWith('application/json'))
    return undefined;
  // Exact, both ways: a load result's metadata holds 64-bit snapshot ids. One level deeper than metadata may
  // nest (a registered file may nest MAX_STORED_JSON_DEPTH levels): the answer wraps it.
  const result = parseExactJson(Buffer.from(response.body).toString(), {
    maxDepth: MAX_STORED_JSON_DEPTH + 1,
  });
  return isMetadataAnswer(result) ? result : undefined;
}

const withBody = (response: StoredResponse, body: object): StoredResponse => ({
  ...response,
  body: Buffer.from(stringifyExactJson(body)),
});

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
  warehouse: Warehouse,
  onEvent: readonly IdempotencyEventListener[] = [],
) {
  /** The table or view with this UUID as it is now, wherever it has been renamed to since. */
  const current = async (request: FastifyRequest, uuid: string | undefined) => {
    if (uuid === undefined) return undefined;
    // Inside the mutation's transaction when the key was met there (reserveIn 'transaction'): read in it.
    const entity = await getEntityByUuid(
      request.transaction ?? db.until(request.deadline),
      prefixOf(request),
      uuid,
    );
    return entity === undefined
      ? undefined
      : { 'metadata-location': entity.metadataLocation, metadata: entity.metadata };
  };

  /**
   * The metadata file a compact answer names, as it was answered (metadata files are immutable: each commit
   * writes a new one), read through the warehouse (confined, bounded in size and time); undefined when it is
   * gone (purged, expired from the log) or is not that table's or view's.
   */
  const file = async (answer: MetadataAnswer, request: FastifyRequest) => {
    const location = answer['metadata-location'];
    const metadata = await warehouse
      .readMetadata(location, 'metadata-location', request.deadline)
      .catch(() => undefined);
    return isObject(metadata) && uuidOf(metadata) === uuidOf(answer.metadata)
      ? { 'metadata-location': location, metadata }
      : undefined;
  };

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
    redact: (response) => {
      const answer = metadataAnswerOf(response);
      return answer === undefined || !('config' in answer)
        ? response
        : withBody(response, { ...answer, config: {} });
    },
    // A replayed load result (create, register, replace) shows the table or view as it is now, as the spec
    // allows ("an equivalent final response ... may reflect a newer state"), found by its UUID; once it is gone,
    // the metadata file it was answered with. A commit's answer replays as it was: stored, or, when it was too
    // large to store, rebuilt from the file the commit wrote (else the table as it is now). Only when neither
    // is there is the stored (compact) answer replayed.
    rebuildReplay: async (stored, { host }) => {
      const answer = metadataAnswerOf(stored);
      if (answer === undefined) return undefined;
      const uuid = uuidOf(answer.metadata);
      if (!('config' in answer)) {
        if (!isCompact(answer)) return undefined;
        const rebuilt = (await file(answer, host)) ?? (await current(host, uuid));
        return rebuilt === undefined ? undefined : withBody(stored, rebuilt);
      }
      const rebuilt =
        (await current(host, uuid)) ?? (isCompact(answer) ? await file(answer, host) : undefined);
      return withBody(stored, { ...answer, ...rebuilt, config: tableConfig() });
    },
    // By status: a 400 of the idempotency layer (an invalid or reused key, a value the store cannot hold) is a
    // BadRequestException like any other.
    formatError: (error: IdemError) => ({
      error: { message: error.message, type: errorTypeOf(error.status), code: error.status },
    }),
  });
}
