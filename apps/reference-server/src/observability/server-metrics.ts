import type { IdempotencyEventListener } from '@idem/core';
import { createIdempotencyMetrics, Series } from '@idem/prometheus';
import type { FastifyInstance } from 'fastify';
import { collectDefaultMetrics, Registry } from 'prom-client';

/** The `route` label of a request that matched no route: every such path counts as this one label. */
export const UNMATCHED_ROUTE = 'unmatched';

/**
 * The `operation` of an idempotent request: its route template without the optional catalog prefix, so that
 * `/v1/namespaces` and `/v1/:prefix/namespaces` are one operation.
 */
export const catalogOperation = ({ route }: { readonly route: string }): string =>
  route.replace(/^\/v1\/:prefix\//, '/v1/');

/**
 * `GET /metrics`: the server's own prom-client registry with idem's series (`@idem/prometheus`), HTTP RED per
 * route template (`http_requests_total`, `http_request_duration_seconds`) and the process metrics of
 * `collectDefaultMetrics`. Returns the listener that feeds idem's series. Scraping never touches the database.
 */
export function installMetrics(app: FastifyInstance): { readonly onEvent: IdempotencyEventListener } {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const idempotency = createIdempotencyMetrics({ registry, operation: catalogOperation });
  const labelNames = ['method', 'route', 'status_code'] as const;
  // Counted in cells per label set (`Series`): prom-client's own metrics build and look up a string of the labels
  // on every request.
  const requests = new Series({
    type: 'counter',
    name: 'http_requests_total',
    help: 'HTTP requests answered, by method, route template and status.',
    labelNames,
    registers: [registry],
  });
  const duration = new Series({
    type: 'histogram',
    name: 'http_request_duration_seconds',
    help: 'From the request to the end of its response, by method, route template and status, in seconds.',
    labelNames,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [registry],
  });

  app.addHook('onResponse', (request, reply, done) => {
    // The template, never the path: a route's label is one per route however many paths reach it.
    const labels = {
      method: request.method,
      route: request.routeOptions.url ?? UNMATCHED_ROUTE,
      status_code: String(reply.statusCode),
    };
    requests.inc(labels);
    duration.observe(labels, reply.elapsedTime / 1000);
    done();
  });
  app.get('/metrics', async (_request, reply) =>
    reply.type(registry.contentType).send(await registry.metrics()),
  );
  return { onEvent: idempotency.onEvent };
}
