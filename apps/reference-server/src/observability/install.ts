import type { IdempotencyEventListener } from '@idem/core';
import fp from 'fastify-plugin';
import type { ServerConfig } from '../config.js';
import type { CatalogDatabase } from '../database/catalog-database.js';
import type { IdempotencyBackend } from '../idempotency/open-store.js';
import { openAuditLog } from './audit-file.js';
import { installHealth } from './health.js';
import { installMetrics } from './server-metrics.js';
import { idempotencyTracing, installServerSpans } from './tracing.js';

/** Paths that answer without a bearer token: probes and the Prometheus scrape. */
export const OPEN_PATHS: ReadonlySet<string> = new Set([
  '/healthz',
  '/readyz',
  '/health',
  '/ready',
  '/live',
  '/metrics',
]);

declare module 'fastify' {
  interface FastifyInstance {
    /**
     * The listeners for the idempotency plugin's and the purge scheduler's `onEvent`: metrics, traces, audit.
     */
    readonly idempotencyEvents: readonly IdempotencyEventListener[];
  }
}

export interface ObservabilityOptions {
  readonly config: ServerConfig;
  readonly db: Pick<CatalogDatabase, 'ping'>;
  /** The idempotency store, which `/health` reports and checks. */
  readonly backend: Pick<IdempotencyBackend, 'ping' | 'description'>;
  /** Whether the log is pino-pretty's lines for a person (observability/logger.ts). */
  readonly readable?: boolean;
}

/**
 * Metrics, traces, the audit log and the probes, and `app.idempotencyEvents`. The server span opens in the
 * first onRequest hook after the request's deadline is set, before every other plugin's hooks; the probes are
 * routes, made once the error handler is there.
 */
export const observability = fp<ObservabilityOptions>(
  async (app, { config, db, backend, readable }) => {
    const { observability } = config;
    const onEvent: IdempotencyEventListener[] = [];
    if (observability.traces) {
      installServerSpans(app);
      onEvent.push(idempotencyTracing());
    }
    if (observability.metrics) onEvent.push(installMetrics(app).onEvent);
    if (observability.audit.enabled) onEvent.push(openAuditLog(app, config, readable));
    installHealth(app, config, db, backend);
    app.decorate('idempotencyEvents', onEvent);
  },
  {
    fastify: '5.x',
    name: 'reference-server/observability',
    dependencies: ['reference-server/deadline', 'reference-server/errors'],
  },
);
