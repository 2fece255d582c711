import { fastifyIdempotency } from '@idem/adapter-fastify';
import type { IdemError } from '@idem/core';
import { withReplayCache } from '@idem/store-memory';
import fp from 'fastify-plugin';
import type { Warehouse } from '../catalog/warehouse.js';
import type { ServerConfig } from '../config.js';
import type { CatalogDatabase } from '../database/catalog-database.js';
import type { Dialect } from '../database/catalog-schema.js';
import type { Executor } from '../database/executor.js';
import { errorTypeOf } from '../http/errors.js';
import { type LeaseControl, leaseFence } from './lease.js';
import type { IdempotencyBackend } from './open-store.js';
import { replayRebuilder } from './replay.js';
import { scopeOf } from './scope.js';
import { withoutConfig } from './stored-answer.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The catalog transaction a mutation runs in, while it runs (mutate.ts): a replay is read in it. */
    transaction: Executor | undefined;
  }
  interface FastifyInstance {
    /**
     * With a store other than the catalog's own database (keys held under a lease): the fence a mutation
     * passes before its commit (mutate.ts). Undefined when keys are reserved in the mutation's transaction.
     */
    readonly idempotencyLease: LeaseControl | undefined;
  }
}

/**
 * How long one call of the store may take before the request is answered a retryable 503 (the coordinator's
 * `storeTimeoutMs`, and the lease fence's).
 */
export const STORE_TIMEOUT_MS = 2_000;

/**
 * Whether a keyed mutation's record is read before its transaction when IDEMPOTENCY_READ_BEFORE_TRANSACTION is
 * not set: on SQLite only, where the read is in-process and a retry's transaction would take a turn on the one
 * connection; on PostgreSQL and MySQL it is a round trip and a pool checkout for every fresh key, which are
 * nearly all keys (the replay cache answers retries with no read at all).
 */
export const readsBeforeTransactionByDefault = (dialect: Dialect): boolean => dialect === 'sqlite';

export interface CatalogIdempotencyOptions {
  readonly config: ServerConfig;
  readonly db: CatalogDatabase;
  readonly warehouse: Warehouse;
  /** The store IDEMPOTENCY_STORE chose (idempotency/open-store.ts). */
  readonly backend: IdempotencyBackend;
}

/**
 * The idempotency plugin (@idem/adapter-fastify), as the catalog uses it, when IDEMPOTENCY is on. Its
 * preHandler runs after the location guard's, and schema validation comes before both, so that malformed
 * input never reserves a key; its scope is the principal bearer auth found. Registered either way, so that
 * the routes can name it as what they come after.
 */
export const catalogIdempotency = fp<CatalogIdempotencyOptions>(
  async (app, { config, db, warehouse, backend }) => {
    app.decorateRequest('transaction', undefined);
    // Only the catalog's own database can hold a key in the mutation's transaction; any other store holds it
    // under a lease, renewed while the mutation runs and fenced by its owner before the commit.
    const lease =
      backend.fence === 'lease'
        ? leaseFence(backend.store, { leaseMs: config.idempotency.leaseMs, storeTimeoutMs: STORE_TIMEOUT_MS })
        : undefined;
    app.decorate('idempotencyLease', lease);
    if (!config.idempotency.enabled) return;
    const { maxEntries, maxBytes } = config.idempotency.replayCache;
    const onEvent = app.idempotencyEvents;
    const { store } = backend;
    await app.register(fastifyIdempotency, {
      // With a replay cache, a replay found in memory is answered before any transaction begins (and, with a
      // leased store, before the store is asked).
      store: maxEntries === 0 ? store : withReplayCache(store, { maxEntries, maxBytes, onEvent }),
      onEvent, // metrics, traces and the audit log (src/observability)
      keyFormat: 'uuidv7',
      lifetimeMs: config.idempotency.lifetimeMs,
      graceMs: config.idempotency.graceMs,
      leaseMs: config.idempotency.leaseMs,
      storeTimeoutMs: STORE_TIMEOUT_MS,
      methods: ['POST', 'DELETE'],
      // On the catalog's database each mutation reserves its key in its own catalog transaction (mutate.ts):
      // one transaction per request, duplicates wait on the record's row, and a crash rolls the reservation
      // back. Elsewhere the key is reserved before the handler ('begin'), and finalized after the commit.
      reserveIn: backend.fence === 'transaction' ? 'transaction' : 'begin',
      // IDEMPOTENCY_READ_BEFORE_TRANSACTION: a retry is answered by one read of its record before any
      // transaction begins (no BEGIN, no reservation attempt, no turn of the handler), and every fresh key pays
      // that read.
      readBeforeTransaction:
        config.idempotency.readBeforeTransaction ?? readsBeforeTransactionByDefault(db.dialect),
      // The store calls before the handler (that read; the reservation, with a leased store) end by the
      // request's deadline, as the transaction after them does.
      deadline: ({ host }) => host?.deadline,
      // The spec declares 400, not 422, for every operation; Iceberg's Java client retries 503 with the same
      // key, and reads 409 as AlreadyExists / CommitFailed.
      statuses: { keyReused: 400, inProgress: 503 },
      inFlight: { strategy: 'wait', maxWaitMs: config.idempotency.maxWaitMs, timeoutStatus: 503 },
      scope: scopeOf,
      redact: withoutConfig,
      rebuildReplay: replayRebuilder(db, warehouse),
      // By status: a 400 of the idempotency layer (an invalid or reused key, a value the store cannot hold)
      // is a BadRequestException like any other.
      formatError: (error: IdemError) => ({
        error: { message: error.message, type: errorTypeOf(error.status), code: error.status },
      }),
    });
  },
  {
    fastify: '5.x',
    name: 'reference-server/idempotency',
    dependencies: [
      'reference-server/observability',
      'reference-server/bearer-auth',
      'reference-server/location-guard',
    ],
    decorators: { fastify: ['idempotencyEvents'], request: ['principal', 'deadline'] },
  },
);
