import {
  createIdempotency,
  type IdempotencyStore,
  type IdempotentRequest,
  type TransactionalStore,
} from '@idem/core';
import { Attribute, createIdempotencyTracing, SpanName } from '@idem/opentelemetry';
import { createMemoryStore } from '@idem/store-memory';
import { context, SpanStatusCode, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';

const KEY = '0190b7e2-5a5d-7c3e-8f00-1234567890ab';
const post = (overrides: Partial<IdempotentRequest> = {}): IdempotentRequest => ({
  method: 'POST',
  route: '/v1/orders/:id',
  path: '/v1/orders/42',
  body: { item: 'book' },
  key: KEY,
  scope: 'alice',
  ...overrides,
});
const created = { status: 201, headers: { 'content-type': 'application/json' }, body: '{"id":42}' };

/** The host's transaction, where the record is written (finalize answers `true`); nothing else is called. */
const committing: TransactionalStore = {
  reserve: () => Promise.reject(new Error('not reserved in the transaction')),
  finalize: () => true,
  release: () => true,
};

function setup(options: { recordKey?: boolean; store?: IdempotencyStore } = {}) {
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  const tracing = createIdempotencyTracing({
    tracer: provider.getTracer('test'),
    ...(options.recordKey === undefined ? {} : { recordKey: options.recordKey }),
  });
  const idem = createIdempotency({
    store: options.store ?? createMemoryStore({ sweepIntervalMs: false }),
    heartbeatIntervalMs: false,
    onEvent: [tracing.onEvent],
  });
  return { exporter, provider, idem };
}

const named = (spans: readonly ReadableSpan[], name: string) => spans.filter((span) => span.name === name);
const only = (spans: readonly ReadableSpan[], name: string): ReadableSpan => {
  const found = named(spans, name);
  expect(found, name).toHaveLength(1);
  return found[0] as ReadableSpan;
};
const ms = ([seconds, nanos]: readonly [number, number]) => seconds * 1_000 + nanos / 1e6;

describe('@idem/opentelemetry: spans of one executed and one replayed request (in-memory exporter)', () => {
  test('executed: validate → create, then process; replayed: validate → lookup, marked duplicate', async () => {
    const { exporter, idem } = setup();
    const first = await idem.begin(post());
    if (first.action !== 'execute') throw new Error(first.action);
    await first.execution.finish(created);
    const executed = exporter.getFinishedSpans();
    exporter.reset();
    expect((await idem.begin(post())).action).toBe('replay');
    const replayed = exporter.getFinishedSpans();

    const validate = only(executed, SpanName.Validate);
    const create = only(executed, SpanName.Create);
    const process = only(executed, SpanName.Process);
    expect(named(executed, SpanName.Lookup)).toHaveLength(0);
    expect(create.parentSpanContext?.spanId).toBe(validate.spanContext().spanId);
    expect(validate.attributes).toMatchObject({
      [Attribute.IsDuplicateRequest]: false,
      [Attribute.RequestMethod]: 'POST',
      [Attribute.RequestRoute]: '/v1/orders/:id',
      [Attribute.OperationName]: '/v1/orders/:id',
      [Attribute.OperationStatus]: 'success',
      [Attribute.Outcome]: 'reserved',
    });
    expect(process.attributes).toMatchObject({
      [Attribute.StatusCode]: 201,
      [Attribute.Outcome]: 'finalized',
      [Attribute.OperationStatus]: 'success',
    });
    expect(process.status.code).toBe(SpanStatusCode.UNSET);
    // create lies within validate; process starts when the key was reserved
    expect(ms(create.startTime)).toBeGreaterThanOrEqual(ms(validate.startTime));
    expect(ms(create.endTime)).toBeLessThanOrEqual(ms(validate.endTime));
    expect(ms(process.startTime)).toBeGreaterThanOrEqual(ms(validate.endTime) - 1);
    expect(ms(process.endTime)).toBeGreaterThanOrEqual(ms(process.startTime));

    const again = only(replayed, SpanName.Validate);
    const lookup = only(replayed, SpanName.Lookup);
    expect(replayed).toHaveLength(2);
    expect(lookup.parentSpanContext?.spanId).toBe(again.spanContext().spanId);
    expect(again.attributes).toMatchObject({
      [Attribute.IsDuplicateRequest]: true,
      [Attribute.Outcome]: 'replayed',
      [Attribute.StatusCode]: 201,
    });
  });

  test('the key is recorded only when asked; scope, path and body never', async () => {
    for (const recordKey of [false, true]) {
      const { exporter, idem } = setup({ recordKey });
      const result = await idem.begin(post());
      if (result.action !== 'execute') throw new Error(result.action);
      await result.execution.finish(created);
      const text = JSON.stringify(exporter.getFinishedSpans().map((span) => span.attributes));
      expect(text.includes(KEY)).toBe(recordKey);
      expect(text).not.toMatch(/alice|\/v1\/orders\/42|book/);
    }
  });

  test('a conflict and a mismatch are lookups; a store outage is a failed validate span', async () => {
    const memory = createMemoryStore({ sweepIntervalMs: false });
    let down = false;
    const store: IdempotencyStore = {
      ...memory,
      reserve: async (params) => {
        if (down) throw new Error('connection refused');
        return memory.reserve(params);
      },
    };
    const { exporter, idem } = setup({ store });
    await idem.begin(post()); // in flight
    await idem.begin(post()); // conflict
    await idem.begin(post({ body: { item: 'pen' } })); // mismatch
    down = true;
    await idem.begin(post({ key: '0190b7e2-5a5d-7c3e-8f00-000000000001' }));
    const validates = named(exporter.getFinishedSpans(), SpanName.Validate);
    expect(validates.map((span) => span.attributes[Attribute.Outcome])).toEqual([
      'reserved',
      'conflict',
      'mismatch',
      'store-error',
    ]);
    expect(validates.map((span) => span.attributes[Attribute.StatusCode])).toEqual([
      undefined,
      409,
      422,
      503,
    ]);
    expect(validates[3]?.status.code).toBe(SpanStatusCode.ERROR);
    expect(named(exporter.getFinishedSpans(), SpanName.Lookup)).toHaveLength(2);
  });

  test('a 5xx releases the key: the process span is a failure', async () => {
    const { exporter, idem } = setup();
    const result = await idem.begin(post());
    if (result.action !== 'execute') throw new Error(result.action);
    await result.execution.finish({ status: 502, headers: {}, body: null });
    const process = only(exporter.getFinishedSpans(), SpanName.Process);
    expect(process.attributes).toMatchObject({
      [Attribute.Outcome]: 'released',
      [Attribute.StatusCode]: 502,
    });
    expect(process.status.code).toBe(SpanStatusCode.ERROR);
  });
});

describe('@idem/opentelemetry: a transactional finalize is traced as it durably ended', () => {
  test('finalized in the transaction, then the commit failed and a 503 went out: one process span, released', async () => {
    const { exporter, idem } = setup();
    const result = await idem.begin(post());
    if (result.action !== 'execute') throw new Error(result.action);
    await result.execution.finalizeWith({ ...created, status: 200 }, committing);
    await result.execution.finish({ status: 503, headers: {}, body: null });
    const process = only(exporter.getFinishedSpans(), SpanName.Process);
    expect(process.attributes).toMatchObject({
      [Attribute.Outcome]: 'released',
      [Attribute.StatusCode]: 503,
    });
  });

  test('finalized in the transaction, and the answer with that status went out: one process span, finalized', async () => {
    const { exporter, idem } = setup();
    const result = await idem.begin(post());
    if (result.action !== 'execute') throw new Error(result.action);
    await result.execution.finalizeWith(created, committing);
    expect(named(exporter.getFinishedSpans(), SpanName.Process)).toHaveLength(0);
    await result.execution.finish(created);
    const process = only(exporter.getFinishedSpans(), SpanName.Process);
    expect(process.attributes).toMatchObject({
      [Attribute.Outcome]: 'finalized',
      [Attribute.StatusCode]: 201,
    });
  });
});

describe('@idem/opentelemetry: parenting under the request span', () => {
  const manager = new AsyncLocalStorageContextManager();
  beforeAll(() => {
    context.setGlobalContextManager(manager.enable());
  });
  afterAll(() => {
    context.disable();
  });

  test('validate and process are children of the span active at begin, even when the execution ends elsewhere', async () => {
    const { exporter, provider, idem } = setup();
    const tracer = provider.getTracer('http');
    const server = tracer.startSpan('POST /v1/orders/:id');
    const execution = await context.with(trace.setSpan(context.active(), server), async () => {
      const result = await idem.begin(post());
      if (result.action !== 'execute') throw new Error(result.action);
      return result.execution;
    });
    await execution.finish(created); // outside the request's context, as a response 'finish' event may be
    server.end();
    const spans = exporter.getFinishedSpans();
    const serverId = server.spanContext().spanId;
    expect(only(spans, SpanName.Validate).parentSpanContext?.spanId).toBe(serverId);
    expect(only(spans, SpanName.Process).parentSpanContext?.spanId).toBe(serverId);
    expect(new Set(spans.map((span) => span.spanContext().traceId)).size).toBe(1);
  });
});

describe('@idem/opentelemetry: without an SDK', () => {
  test('the global no-op tracer records nothing and costs nothing noticeable', async () => {
    const tracing = createIdempotencyTracing();
    const idem = createIdempotency({
      store: createMemoryStore({ sweepIntervalMs: false }),
      heartbeatIntervalMs: false,
      onEvent: tracing.onEvent,
    });
    const result = await idem.begin(post());
    if (result.action !== 'execute') throw new Error(result.action);
    expect(await result.execution.finish(created)).toBe('finalized');
  });
});
