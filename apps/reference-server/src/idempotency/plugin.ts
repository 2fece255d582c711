import { fastifyIdempotency } from '@idem/adapter-fastify';
import type { IdemError, IdempotencyEventListener } from '@idem/core';
import type { FastifyInstance } from 'fastify';
import type { Warehouse } from '../catalog/warehouse.js';
import type { ServerConfig } from '../config.js';
import type { CatalogDatabase } from '../database/catalog-database.js';
import { errorTypeOf } from '../http/errors.js';
import { replayRebuilder } from './replay.js';
import { scopeOf } from './scope.js';
import { withoutConfig } from './stored-answer.js';

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
  await app.register(fastifyIdempotency, {
    store: db.store,
    onEvent, // metrics, traces and the audit log (src/observability)
    keyFormat: 'uuidv7',
    lifetimeMs: config.idempotency.lifetimeMs,
    graceMs: config.idempotency.graceMs,
    leaseMs: config.idempotency.leaseMs,
    methods: ['POST', 'DELETE'],
    // Each mutation reserves its key in its own catalog transaction (mutate.ts): one transaction per
    // request, duplicates wait on the record's row, and a crash rolls the reservation back.
    reserveIn: 'transaction',
    // The spec declares 400, not 422, for every operation; Iceberg's Java client retries 503 with the same
    // key, and reads 409 as AlreadyExists / CommitFailed.
    statuses: { keyReused: 400, inProgress: 503 },
    inFlight: { strategy: 'wait', maxWaitMs: config.idempotency.maxWaitMs, timeoutStatus: 503 },
    scope: scopeOf,
    redact: withoutConfig,
    rebuildReplay: replayRebuilder(db, warehouse),
    // By status: a 400 of the idempotency layer (an invalid or reused key, a value the store cannot hold) is a
    // BadRequestException like any other.
    formatError: (error: IdemError) => ({
      error: { message: error.message, type: errorTypeOf(error.status), code: error.status },
    }),
  });
}
