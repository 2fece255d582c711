import type { FastifyInstance } from 'fastify';
import { buildApp } from './app.js';
import { loadConfig } from './config.js';
import { within } from './database/deadline.js';
import { openWithRetry } from './database/late.js';
import { databaseOptions } from './db.js';
import { startTracing } from './observability/tracing.js';

const config = loadConfig();
// Before anything records a span: traces are exported only when the OTEL_* environment asks for them.
const stopTracing = config.observability.traces ? startTracing() : undefined;
let app: FastifyInstance | undefined;
// The server listens at once: `/live` answers while the database is not reachable yet, `/ready` says so with a
// 503, and so does every request that needs the database, until it opens. A database that goes away later is
// met the same way, request by request.
const database = openWithRetry(config.databaseUrl, databaseOptions(config), {
  maxDelayMs: config.database.retryMaxDelayMs,
  onRetry: (error, attempt, delayMs) =>
    app?.log.warn({ err: error, attempt, delayMs }, 'the database is not reachable; trying again'),
});
app = await buildApp(config, database.db);
const server = app;
database.opened.then(
  () => server.log.info('the database is open'),
  () => {},
);

let stopping = false;
const stop = async (signal: string) => {
  if (stopping) return;
  stopping = true;
  server.log.info({ signal, drainMs: config.shutdownDrainMs }, 'stopping: draining requests in flight');
  const drained = await server.drain(config.shutdownDrainMs);
  if (!drained) server.log.warn('requests still in flight after the drain time were cut off');
  await within(config.database.acquireTimeoutMs, 'closing', () => database.db.close()).catch((error) =>
    server.log.warn({ err: error }, 'closing the database did not finish'),
  );
  await stopTracing?.();
  process.exit(0);
};
process.on('SIGINT', () => void stop('SIGINT'));
process.on('SIGTERM', () => void stop('SIGTERM'));
await server.listen({ host: config.host, port: config.port });
