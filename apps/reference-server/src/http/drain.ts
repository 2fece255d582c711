import fp from 'fastify-plugin';
import { retryLater } from '../catalog/iceberg-error.js';
import { sendError } from './errors.js';

declare module 'fastify' {
  interface FastifyInstance {
    /**
     * Stop gracefully: stop accepting connections, close the idle ones at once, answer requests that still
     * arrive on open connections with a retryable 503 (`Retry-After`, an IcebergErrorResponse, `Connection:
     * close`), and wait for the requests in flight up to `drainMs`; past it, close every connection. Resolves
     * `true` when every request finished in time. The database stays open: close it after.
     */
    drain(drainMs: number): Promise<boolean>;
  }
}

/**
 * The graceful stop (Fastify's own answer while closing is a plain 503 without `Retry-After`, so the server
 * is made with `return503OnClosing: false` and answers here instead). After the server span opens: the 503s
 * of a stop are traced and counted like any answer.
 */
export const drain = fp(
  async (app) => {
    let draining = false;
    app.addHook('onRequest', async (_request, reply) => {
      if (!draining) return;
      reply.header('connection', 'close');
      return sendError(
        reply,
        retryLater('this catalog node is shutting down; retry the request (with the same Idempotency-Key)'),
      );
    });
    // A response in flight when the stop began closes its connection once sent: no keep-alive past the drain.
    app.addHook('onSend', async (_request, reply) => {
      if (draining) reply.header('connection', 'close');
    });
    let stopping: Promise<boolean> | undefined;
    app.decorate('drain', function drain(drainMs: number): Promise<boolean> {
      stopping ??= (async () => {
        draining = true;
        // close() stops accepting and, with forceCloseConnections 'idle', closes idle keep-alive connections.
        const closed = app.close().then(() => true);
        let timer: NodeJS.Timeout | undefined;
        const late = new Promise<false>((resolve) => {
          timer = setTimeout(() => resolve(false), drainMs);
        });
        const finished = await Promise.race([closed, late]);
        clearTimeout(timer);
        if (!finished) {
          // What did not finish in time is cut off; a reservation it held rolls back with its transaction
          // when the database connection closes.
          app.server.closeAllConnections();
          await Promise.race([closed, new Promise((resolve) => setTimeout(resolve, 1_000).unref())]);
        }
        return finished;
      })();
      return stopping;
    });
  },
  { fastify: '5.x', name: 'reference-server/drain', dependencies: ['reference-server/observability'] },
);
