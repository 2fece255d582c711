import type { IdempotencyEvent, IdempotencyEventListener } from '@idem/core';
import {
  type Attributes,
  type Context,
  context,
  type Span,
  SpanKind,
  SpanStatusCode,
  type Tracer,
  trace,
} from '@opentelemetry/api';

/** The spans this package records. */
export const SpanName = {
  /** `begin`'s decision for a keyed request: from the call to execute, replay or refuse. */
  Validate: 'idempotency.validate',
  /** The store call that created (or took over) the record; a child of `validate`. */
  Create: 'idempotency.create',
  /** The store call that found an existing record (replayed, in flight, or another request's); a child of `validate`. */
  Lookup: 'idempotency.lookup',
  /** The execution under the reservation: from it until the response was stored or the key released. */
  Process: 'idempotency.process',
} as const;

/** Attribute names: the common ones where there are, `idempotency.*` for the rest. */
export const Attribute = {
  OperationName: 'operation.name',
  OperationStatus: 'operation.status',
  OperationDurationMs: 'operation.duration_ms',
  RequestMethod: 'request.method',
  /** The route template (without the values a path carries). */
  RequestRoute: 'request.route',
  IsDuplicateRequest: 'is_duplicate_request',
  StatusCode: 'http.response.status_code',
  Outcome: 'idempotency.outcome',
  TookOver: 'idempotency.took_over',
  Waited: 'idempotency.waited',
  /** Only with `recordKey: true`. */
  Key: 'idempotency.key',
  ErrorType: 'error.type',
} as const;

/** Options of {@link createIdempotencyTracing}. */
export interface IdempotencyTracingOptions {
  /** @default `trace.getTracer('@idem/opentelemetry')` from the global provider */
  readonly tracer?: Tracer;
  /**
   * Record the idempotency key as `idempotency.key`. Off by default: a key is the client's handle on a
   * stored response, and traces often reach more people than the service does. @default false
   */
  readonly recordKey?: boolean;
  /** The `operation.name` attribute of a request. @default the route template */
  readonly operation?: (request: { readonly method: string; readonly route: string }) => string;
  /**
   * Executions followed at once (their context, to parent the `process` span); past it the oldest is
   * forgotten and its `process` span is parented on the context active when it ends. @default 10_000
   */
  readonly maxTracked?: number;
}

/** The tracer's listener: pass `onEvent` to the coordinator (or its adapter). */
export interface IdempotencyTracing {
  readonly onEvent: IdempotencyEventListener;
}

/** An execution between its reservation and its end. */
interface Tracked {
  readonly parent: Context;
  readonly reservedAtMs: number;
  leaseLostAtMs?: number;
}

type DecisionEvent = Extract<IdempotencyEvent, { type: 'reserved' | 'replayed' | 'conflict' | 'mismatch' }>;
type EndEvent = Extract<IdempotencyEvent, { type: 'finalized' | 'released' | 'held' | 'lease-lost' }>;

/** Epoch milliseconds with sub-millisecond precision, as OpenTelemetry takes them. */
const nowMs = (): number => performance.timeOrigin + performance.now();

/**
 * Record OpenTelemetry spans from idempotency events: `idempotency.validate` with a child
 * `idempotency.create` or `idempotency.lookup` for each keyed request, and `idempotency.process` for each
 * execution. Spans are made when the events arrive, with their start times from the events' durations, and
 * are parented on the context active when the request reached `begin` (the server span of your HTTP
 * instrumentation). Uses `@opentelemetry/api` only: without an SDK, nothing is recorded.
 *
 * @example
 * const tracing = createIdempotencyTracing();
 * app.register(fastifyIdempotency, { store, onEvent: [tracing.onEvent] });
 */
export function createIdempotencyTracing(options: IdempotencyTracingOptions = {}): IdempotencyTracing {
  const tracer = options.tracer ?? trace.getTracer('@idem/opentelemetry');
  const recordKey = options.recordKey ?? false;
  const nameOf = options.operation ?? (({ route }) => route);
  const maxTracked = options.maxTracked ?? 10_000;
  const tracked = new Map<string, Tracked>();

  const requestAttributes = (event: {
    readonly method?: string | undefined;
    readonly route?: string | undefined;
    readonly key?: string | undefined;
  }): Attributes => {
    const attributes: Attributes = {};
    if (event.method !== undefined) attributes[Attribute.RequestMethod] = event.method;
    if (event.route !== undefined) {
      attributes[Attribute.RequestRoute] = event.route;
      let name = event.route;
      try {
        name = nameOf({ method: event.method ?? '', route: event.route });
      } catch {
        // a broken naming function leaves the template
      }
      attributes[Attribute.OperationName] = name;
    }
    if (recordKey && event.key !== undefined) attributes[Attribute.Key] = event.key;
    return attributes;
  };

  /** A span from `startMs` to `endMs`, ended at once. */
  const record = (
    name: string,
    parent: Context,
    startMs: number,
    endMs: number,
    attributes: Attributes,
    failed: boolean,
  ): Span => {
    const span = tracer.startSpan(
      name,
      { kind: SpanKind.INTERNAL, startTime: startMs, attributes: { ...attributes } },
      parent,
    );
    span.setAttribute(Attribute.OperationDurationMs, endMs - startMs);
    if (failed) span.setStatus({ code: SpanStatusCode.ERROR });
    return span;
  };

  const decided = (event: DecisionEvent): void => {
    const endMs = nowMs();
    const parent = context.active();
    const duplicate = event.type !== 'reserved';
    const attributes: Attributes = {
      ...requestAttributes(event),
      [Attribute.IsDuplicateRequest]: duplicate,
      [Attribute.Outcome]: event.type,
      [Attribute.OperationStatus]:
        event.type === 'reserved' || event.type === 'replayed' ? 'success' : 'failure',
    };
    if (event.type !== 'reserved') attributes[Attribute.StatusCode] = event.status;
    if (event.type === 'reserved') attributes[Attribute.TookOver] = event.tookOver;
    if (event.type === 'conflict') attributes[Attribute.Waited] = event.waited;
    const validate = record(SpanName.Validate, parent, endMs - event.elapsedMs, endMs, attributes, false);
    const storeCall = record(
      duplicate ? SpanName.Lookup : SpanName.Create,
      trace.setSpan(parent, validate),
      endMs - Math.min(event.durationMs, event.elapsedMs),
      endMs,
      attributes,
      false,
    );
    storeCall.end(endMs);
    validate.end(endMs);
    if (event.type === 'reserved') {
      if (tracked.size >= maxTracked) {
        const [oldest] = tracked.keys();
        if (oldest !== undefined) tracked.delete(oldest);
      }
      tracked.set(event.owner, { parent, reservedAtMs: endMs });
    }
  };

  const ended = (event: EndEvent, endMs: number): void => {
    const entry = tracked.get(event.owner);
    tracked.delete(event.owner);
    const failed =
      event.type === 'lease-lost' ||
      event.type === 'held' ||
      event.status === undefined ||
      event.status >= 500 ||
      (event.type === 'released' && event.reason !== 'status');
    const attributes: Attributes = {
      ...requestAttributes(event),
      [Attribute.IsDuplicateRequest]: false,
      [Attribute.Outcome]: event.type,
      [Attribute.OperationStatus]: failed ? 'failure' : 'success',
    };
    if (event.type !== 'held' && event.status !== undefined) attributes[Attribute.StatusCode] = event.status;
    const startMs = entry?.reservedAtMs ?? endMs - event.executionMs;
    const span = record(
      SpanName.Process,
      entry?.parent ?? context.active(),
      startMs,
      endMs,
      attributes,
      failed,
    );
    if (entry?.leaseLostAtMs !== undefined) {
      span.addEvent('idempotency.lease_lost', { phase: 'heartbeat' }, entry.leaseLostAtMs);
    }
    if (event.type === 'lease-lost') span.addEvent('idempotency.lease_lost', { phase: event.phase }, endMs);
    span.end(endMs);
  };

  const storeFailed = (event: Extract<IdempotencyEvent, { type: 'store-error' | 'store-limit' }>): void => {
    const endMs = nowMs();
    const entry =
      event.type === 'store-error' && event.owner !== undefined ? tracked.get(event.owner) : undefined;
    const outage = event.type === 'store-error';
    const attributes: Attributes = {
      ...requestAttributes(event),
      [Attribute.Outcome]: event.type,
      [Attribute.OperationStatus]: 'failure',
      [Attribute.ErrorType]: outage ? 'store_unavailable' : 'store_limit',
    };
    if (event.status !== undefined) attributes[Attribute.StatusCode] = event.status;
    if (event.operation === 'reserve') {
      // No decision was reached: the validate span says why.
      const durationMs = outage ? event.durationMs : 0;
      const span = record(SpanName.Validate, context.active(), endMs - durationMs, endMs, attributes, outage);
      span.end(endMs);
    } else if (
      outage &&
      entry !== undefined &&
      (event.operation === 'finalize' || event.operation === 'release')
    ) {
      tracked.delete(event.owner as string);
      const span = record(SpanName.Process, entry.parent, entry.reservedAtMs, endMs, attributes, true);
      span.end(endMs);
    }
  };

  const onEvent = (event: IdempotencyEvent): void => {
    switch (event.type) {
      case 'reserved':
      case 'replayed':
      case 'conflict':
      case 'mismatch':
        decided(event);
        return;
      case 'finalized':
      case 'released':
      case 'held':
        ended(event, nowMs());
        return;
      case 'lease-lost':
        if (event.phase !== 'heartbeat') ended(event, nowMs());
        else {
          const entry = tracked.get(event.owner);
          if (entry !== undefined) entry.leaseLostAtMs = nowMs();
        }
        return;
      case 'store-error':
      case 'store-limit':
        storeFailed(event);
        return;
      default:
        return;
    }
  };
  return { onEvent };
}
