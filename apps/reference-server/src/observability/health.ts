import type { FastifyInstance } from 'fastify';
import type { ServerConfig } from '../config.js';
import type { CatalogDatabase } from '../database/catalog-database.js';

/**
 * One database check at a time, answered within `timeoutMs`: a hung database makes a probe answer "down" in
 * time, and probes arriving meanwhile share the check in flight instead of queueing more behind it.
 */
export function databaseCheck(db: Pick<CatalogDatabase, 'ping'>, timeoutMs: number): () => Promise<boolean> {
  let inFlight: Promise<boolean> | undefined;
  return () => {
    // The check's own deadline: a hung database's connection is given up on (destroyed) when the probe is.
    inFlight ??= db.ping(performance.now() + timeoutMs).then(
      () => true,
      () => false,
    );
    const check = inFlight;
    void check.finally(() => {
      if (inFlight === check) inFlight = undefined;
    });
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<boolean>((resolve) => {
      timer = setTimeout(() => resolve(false), timeoutMs);
      timer.unref();
    });
    return Promise.race([check, late]).finally(() => clearTimeout(timer));
  };
}

/**
 * The probes, with their JSON shapes: `/live` (the process answers), `/ready` (the database
 * answers: 503 otherwise) and `/health` (each component). `/healthz` and `/readyz` keep their old answers.
 * The catalog has no cache, so no `cache` entry is reported.
 */
export function installHealth(
  app: FastifyInstance,
  config: ServerConfig,
  db: Pick<CatalogDatabase, 'ping'>,
): void {
  const databaseUp = databaseCheck(db, config.observability.healthTimeoutMs);
  const timestamp = () => new Date().toISOString();

  app.get('/live', async () => ({ status: 'alive', timestamp: timestamp() }));

  app.get('/ready', async (_request, reply) => {
    const up = await databaseUp();
    return reply.code(up ? 200 : 503).send({
      status: up ? 'ready' : 'not_ready',
      timestamp: timestamp(),
      dependencies: { database: up ? 'connected' : 'disconnected' },
    });
  });

  app.get('/health', async (_request, reply) => {
    const up = await databaseUp();
    const database = up ? 'healthy' : 'unhealthy';
    // The idempotency records live in the catalog's database: the service is as healthy as it is.
    const idempotency = config.idempotency.enabled ? database : 'disabled';
    return reply.code(up ? 200 : 503).send({
      status: up ? 'healthy' : 'unhealthy',
      timestamp: timestamp(),
      components: { database, idempotency_service: idempotency },
    });
  });

  app.get('/healthz', async () => ({ status: 'ok' }));
  app.get('/readyz', async (_request, reply) =>
    (await databaseUp()) ? { status: 'ready' } : reply.code(503).send({ status: 'database unreachable' }),
  );
}
