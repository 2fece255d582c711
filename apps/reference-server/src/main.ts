import { resolve } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { buildApp } from './app.js';
import { loadConfig, type ServerConfig } from './config.js';
import { within } from './database/deadline.js';
import { openWithRetry } from './database/late.js';
import { databaseOptions } from './database/options.js';
import { whyUnreachable } from './database/unreachable.js';
import { startTracing } from './observability/tracing.js';
import { CONFIGURATION_EXIT_CODE, redactedUrl, SettingError } from './setting-error.js';

/** Stop before anything started: one line on stderr, no stack (the message says what to change). */
function fail(message: string, code: number): never {
  process.stderr.write(`reference-server: ${message.replace(/[\r\n]+/g, ' ')}\n`);
  process.exit(code);
}

let config: ServerConfig;
try {
  config = loadConfig();
} catch (error) {
  // Every setting's problem is a SettingError; anything else thrown here is one too, as far as the operator
  // can tell (the settings are all it read).
  fail(
    error instanceof SettingError ? error.message : String((error as Error)?.message ?? error),
    CONFIGURATION_EXIT_CODE,
  );
}
// Before anything records a span: traces are exported only when the OTEL_* environment asks for them.
const stopTracing = config.observability.traces ? startTracing() : undefined;
const databaseText = redactedUrl(config.databaseUrl);
const warehouseText = resolve(config.warehouse);

let app: FastifyInstance | undefined;
/** Attempts that failed before the server's log was there, told once it is. */
const early: (() => void)[] = [];
let openedAtStart = false;
let listening = false;
let lastWhy: string | undefined;
// The server listens at once: `/live` answers while the database is not reachable yet, `/ready` says so with a
// 503, and so does every request that needs the database, until it opens. A database that goes away later is
// met the same way, request by request.
const database = openWithRetry(config.databaseUrl, databaseOptions(config), {
  maxDelayMs: config.database.retryMaxDelayMs,
  // One short line per attempt: the cause, the database and its host (never the SQL that failed, a stack or
  // the password), and when the next attempt comes.
  onRetry: (error, attempt, delayMs) => {
    const why = whyUnreachable(error, config.databaseUrl);
    lastWhy = why;
    const tell = () =>
      app?.log.warn(
        { attempt, retryInMs: delayMs, cause: why },
        `${why}; trying again in ${delayMs} ms (attempt ${attempt})`,
      );
    if (app === undefined) early.push(tell);
    else tell();
  },
});
database.opened.then(
  () => {
    if (app === undefined || !listening) openedAtStart = true;
    else app.log.info({ database: databaseText }, `the database is open: ${databaseText}`);
  },
  () => {},
);
try {
  app = await buildApp(config, database.db);
} catch (error) {
  // The warehouse cannot be made or used: say which and why, as for a setting.
  const { code, message } = error as NodeJS.ErrnoException;
  const why =
    code === 'EEXIST'
      ? 'it is a file, not a directory'
      : code === 'ENOTDIR'
        ? 'a file stands where one of its parent directories should be'
        : code === 'EACCES' || code === 'EPERM'
          ? 'permission denied'
          : code === 'EROFS'
            ? 'the file system is read-only'
            : (code ?? message);
  fail(
    `WAREHOUSE ${JSON.stringify(warehouseText)} cannot be used as the warehouse directory: ${why}`,
    CONFIGURATION_EXIT_CODE,
  );
}
const server = app;

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
try {
  await server.listen({
    host: config.host,
    port: config.port,
    // The start line: where it listens, on which database (no password) and warehouse, and whether the
    // database is open yet. Fastify logs one per address it listens on.
    listenTextResolver: (address) => {
      const state = openedAtStart ? 'open' : lastWhy === undefined ? 'opening' : 'not reachable yet';
      return {
        address,
        database: databaseText,
        databaseState: state,
        warehouse: warehouseText,
        msg: `Server listening at ${address} · database ${databaseText} (${state}) · warehouse ${warehouseText}`,
      } as unknown as string;
    },
  });
  listening = true;
} catch (error) {
  const { code, message } = error as NodeJS.ErrnoException;
  const why =
    code === 'EADDRINUSE'
      ? 'the address is in use (another process listens there)'
      : code === 'EACCES'
        ? 'permission denied (a port under 1024 needs privileges)'
        : code === 'EADDRNOTAVAIL'
          ? 'no interface of this machine has that address'
          : code === 'ENOTFOUND' || code === 'EAI_AGAIN'
            ? 'the host name is not known'
            : (code ?? message);
  fail(`cannot listen on ${config.host}:${config.port} (HOST, PORT): ${why}`, 1);
}
for (const tell of early.splice(0)) tell();
