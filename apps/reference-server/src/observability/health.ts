import type { FastifyInstance } from 'fastify';
import type { ServerConfig } from '../config.js';
import type { CatalogDatabase } from '../database/catalog-database.js';
import type { IdempotencyBackend } from '../idempotency/open-store.js';

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
 * The probes, with their JSON shapes: `/live` (the process answers), `/ready` (the database answers: 503
 * otherwise) and `/health` (each component, and where the idempotency records live). `/healthz` and `/readyz`
 * keep their old answers. The catalog has no cache, so no `cache` entry is reported.
 *
 * A store of its own (a database, Redis) is checked by `/health` only: while it is down, the node still serves
 * reads and requests without a key, so it stays ready; keyed mutations answer a retryable 503 meanwhile.
 */
export function installHealth(
  app: FastifyInstance,
  config: ServerConfig,
  db: Pick<CatalogDatabase, 'ping'>,
  backend: Pick<IdempotencyBackend, 'ping' | 'description'>,
): void {
  const { healthTimeoutMs } = config.observability;
  const databaseUp = databaseCheck(db, healthTimeoutMs);
  const { description } = backend;
  const separate = !(description.store === 'sql' && description.database === 'catalog');
  const storeUp = separate ? databaseCheck(backend, healthTimeoutMs) : undefined;
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
    const [up, stored] = await Promise.all([databaseUp(), storeUp?.()]);
    const database = up ? 'healthy' : 'unhealthy';
    // In the catalog's database the records are as healthy as it is; a store of its own is checked itself.
    const storeHealthy = stored ?? up;
    const idempotency = !config.idempotency.enabled ? 'disabled' : storeHealthy ? 'healthy' : 'unhealthy';
    const healthy = up && idempotency !== 'unhealthy';
    return reply.code(healthy ? 200 : 503).send({
      status: healthy ? 'healthy' : 'unhealthy',
      timestamp: timestamp(),
      components: { database, idempotency_service: idempotency },
      ...(config.idempotency.enabled ? { idempotency: description } : {}),
    });
  });

  app.get('/healthz', async () => ({ status: 'ok' }));
  app.get('/readyz', async (_request, reply) =>
    (await databaseUp()) ? { status: 'ready' } : reply.code(503).send({ status: 'database unreachable' }),
  );
}
