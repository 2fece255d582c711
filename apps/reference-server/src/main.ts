import { buildApp } from './app.js';
import { loadConfig } from './config.js';
import { openDatabase } from './db.js';

const config = loadConfig();
const db = await openDatabase(config.databaseUrl, { lockTimeoutMs: config.idempotency.maxWaitMs });
const app = await buildApp(config, db);
const close = async () => {
  await app.close();
  await db.close();
  process.exit(0);
};
process.once('SIGINT', () => void close());
process.once('SIGTERM', () => void close());
await app.listen({ host: config.host, port: config.port });
