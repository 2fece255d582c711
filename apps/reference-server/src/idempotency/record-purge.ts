import { type IdempotencyEventListener, startPurgeScheduler } from '@idem/core';
import type { FastifyInstance } from 'fastify';
import type { ServerConfig } from '../config.js';
import type { CatalogDatabase } from '../database/catalog-database.js';

/**
 * Delete expired idempotency records periodically, in batches, until the server closes. Every node runs it:
 * purging is safe concurrently, and each node's timer is jittered.
 */
export function startRecordPurge(
  app: FastifyInstance,
  config: ServerConfig,
  db: CatalogDatabase,
  listeners: readonly IdempotencyEventListener[] = [],
) {
  const { purge } = config.idempotency;
  if (!config.idempotency.enabled || !purge.enabled) return;
  const stop = startPurgeScheduler({
    store: db.store,
    intervalMs: purge.intervalMs,
    batchSize: purge.batchSize,
    onEvent: [
      (event) => {
        if (event.type === 'purged' && event.count > 0)
          app.log.info({ count: event.count, batches: event.batches }, 'purged expired idempotency records');
        else if (event.type === 'store-error')
          app.log.warn({ err: event.error }, 'purging idempotency records failed');
      },
      ...listeners,
    ],
  });
  // Resolves once a purge in progress has finished, before the database closes.
  app.addHook('onClose', async () => stop());
}
