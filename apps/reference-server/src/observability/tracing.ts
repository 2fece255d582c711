import type { IdempotencyEventListener } from '@idem/core';
import { createIdempotencyTracing } from '@idem/opentelemetry';
import { context, propagation, type Span, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { NodeSDK } from '@opentelemetry/sdk-node';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { catalogOperation } from './server-metrics.js';

/**
 * Start the OpenTelemetry SDK for traces, configured by the standard `OTEL_*` variables (endpoint, protocol,
 * headers, sampler, resource). Only traces: metrics are served to Prometheus, and no logs are exported.
 * Returns the shutdown, which flushes the spans still buffered.
 */
export function startTracing(environment: NodeJS.ProcessEnv = process.env): () => Promise<void> {
  const named =
    Boolean(environment.OTEL_SERVICE_NAME) ||
    /(^|,)\s*service\.name\s*=/.test(environment.OTEL_RESOURCE_ATTRIBUTES ?? '');
  const sdk = new NodeSDK({
    instrumentations: [],
    metricReaders: [],
    logRecordProcessors: [],
    ...(named ? {} : { serviceName: 'idem-reference-server' }),
  });
  sdk.start();
  return () => sdk.shutdown();
}

/**
 * A server span per request, named by method and route template, continuing the caller's trace
 * (`traceparent`), active for the rest of the request: idem's spans and the log lines of the request land in
 * it. With no SDK started, these are the API's no-op spans.
 */
export function installServerSpans(app: FastifyInstance): void {
  const tracer = trace.getTracer('@idem/reference-server');
  const spans = new WeakMap<FastifyRequest, Span>();
  app.addHook('onRequest', (request, _reply, done) => {
    const route = request.routeOptions.url;
    const parent = propagation.extract(context.active(), request.headers);
    const span = tracer.startSpan(
      route === undefined ? request.method : `${request.method} ${route}`,
      {
        kind: SpanKind.SERVER,
        attributes: {
          'http.request.method': request.method,
          ...(route === undefined ? {} : { 'http.route': route }),
        },
      },
      parent,
    );
    spans.set(request, span);
    // Everything after this hook (the other hooks, idem's preHandler, the handler) runs in the span's context.
    context.with(trace.setSpan(parent, span), done);
  });
  const end = (request: FastifyRequest, status: number | undefined): void => {
    const span = spans.get(request);
    if (span === undefined) return;
    spans.delete(request);
    if (status !== undefined) span.setAttribute('http.response.status_code', status);
    if (status === undefined || status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
    span.end();
  };
  app.addHook('onResponse', (request, reply, done) => {
    end(request, reply.statusCode);
    done();
  });
  app.addHook('onRequestAbort', (request, done) => {
    end(request, undefined);
    done();
  });
}

/** idem's spans (`@idem/opentelemetry`), named by catalog operation. */
export const idempotencyTracing = (): IdempotencyEventListener =>
  createIdempotencyTracing({ operation: catalogOperation }).onEvent;
