import { buildApp } from './app.js';
import { loadConfig } from './config.js';
import { openDatabase } from './db.js';
import { startTracing } from './observability/tracing.js';

const config = loadConfig();
// Before anything records a span: traces are exported only when the OTEL_* environment asks for them.
const stopTracing = config.observability.traces ? startTracing() : undefined;
const db = await openDatabase(config.databaseUrl, { lockTimeoutMs: config.idempotency.maxWaitMs });
const app = await buildApp(config, db);
const close = async () => {
  await app.close();
  await db.close();
  await stopTracing?.();
  process.exit(0);
};
process.once('SIGINT', () => void close());
process.once('SIGTERM', () => void close());
await app.listen({ host: config.host, port: config.port });
