import type { IdempotencyEventListener } from '@idem/core';
import type { FastifyInstance } from 'fastify';
import type { ServerConfig } from '../config.js';
import type { CatalogDatabase } from '../database/catalog-database.js';
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

/** `true` for a request to one of {@link OPEN_PATHS} (whatever its query string). */
export const isOpenPath = (url: string): boolean => OPEN_PATHS.has(url.split('?', 1)[0] as string);

/**
 * Metrics, traces, the audit log and the probes, on a server being built. Call it before the routes and the
 * other hooks: the server span must open first. Returns the listeners for the idempotency plugin's and the
 * purge scheduler's `onEvent`.
 */
export function installObservability(
  app: FastifyInstance,
  config: ServerConfig,
  db: Pick<CatalogDatabase, 'ping'>,
  /** Whether the log is pino-pretty's lines for a person (observability/logger.ts). */
  readable?: boolean,
): { readonly onEvent: readonly IdempotencyEventListener[] } {
  const { observability } = config;
  const onEvent: IdempotencyEventListener[] = [];
  if (observability.traces) {
    installServerSpans(app);
    onEvent.push(idempotencyTracing());
  }
  if (observability.metrics) onEvent.push(installMetrics(app).onEvent);
  if (observability.audit.enabled) onEvent.push(openAuditLog(app, config, readable));
  installHealth(app, config, db);
  return { onEvent };
}
