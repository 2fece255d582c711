import { type IdempotencyStore, startPurgeScheduler } from '@idem/core';
import fp from 'fastify-plugin';
import type { ServerConfig } from '../config.js';

export interface RecordPurgeOptions {
  readonly config: ServerConfig;
  /** The store IDEMPOTENCY_STORE chose: the catalog's database, a database of its own, memory or Redis. */
  readonly store: IdempotencyStore;
}

/**
 * Delete expired idempotency records periodically, in batches, until the server closes, from whichever store is
 * configured. Every node runs it: purging is safe concurrently, and each node's timer is jittered. Its events go
 * to observability's listeners too. Redis expires each record itself at its `expiresAtMs`: its purge finds
 * nothing and costs no command (@idem/store-redis), so it runs there too rather than being a case of its own.
 */
export const recordPurge = fp<RecordPurgeOptions>(
  async (app, { config, store }) => {
    const { purge } = config.idempotency;
    if (!config.idempotency.enabled || !purge.enabled) return;
    const stop = startPurgeScheduler({
      store,
      intervalMs: purge.intervalMs,
      batchSize: purge.batchSize,
      onEvent: [
        (event) => {
          if (event.type === 'purged' && event.count > 0)
            app.log.info(
              { count: event.count, batches: event.batches },
              'purged expired idempotency records',
            );
          else if (event.type === 'store-error')
            app.log.warn({ err: event.error }, 'purging idempotency records failed');
        },
        ...app.idempotencyEvents,
      ],
    });
    // Resolves once a purge in progress has finished, before the database closes.
    app.addHook('onClose', async () => stop());
  },
  {
    fastify: '5.x',
    name: 'reference-server/record-purge',
    dependencies: ['reference-server/observability'],
    decorators: { fastify: ['idempotencyEvents'] },
  },
);
