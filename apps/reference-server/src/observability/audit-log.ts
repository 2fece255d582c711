import type { IdempotencyEvent, IdempotencyEventListener } from '@idem/core';
import { logText } from './log-text.js';

/** Where audit lines go: a pino logger (the server's, or one writing to the audit file). */
export interface AuditSink {
  info(fields: object, message: string): void;
  warn(fields: object, message: string): void;
  /** pino's: when the level is off, no line is built at all (no masking, no escaping). */
  isLevelEnabled?(level: 'info' | 'warn'): boolean;
}

/** What an audit line says was decided for a key. */
export type AuditDecision =
  | 'reserved'
  | 'lease-taken-over'
  | 'replayed'
  | 'mismatch'
  | 'in-flight'
  | 'finalized'
  | 'released'
  | 'held'
  | 'lease-lost'
  | 'store-unavailable'
  | 'store-limit';

export interface AuditLogOptions {
  /** Mask a principal for the line (see `principal-mask.ts`). */
  readonly maskPrincipal: (principal: string) => string;
  /** The parts of a scope: the principal, masked on the line, and the rest (the catalog prefix). */
  readonly splitScope: (scope: string) => { readonly prefix: string; readonly principal: string };
}

const round = (ms: number): number => Math.round(ms * 10) / 10;

/**
 * The audit log of idempotency key usage (every use of a key, for operators): one structured
 * line per key decision, with the masked principal, the rest of the scope, the key, method, route template,
 * status and duration. Events carry no body, path or credential, so neither do the lines; every text from a
 * request is escaped (see `logText`).
 */
export function createAuditLog(sink: AuditSink, options: AuditLogOptions): IdempotencyEventListener {
  const line = (
    decision: AuditDecision,
    event: { scope: string; key: string; method?: string | undefined; route?: string | undefined },
    details: Record<string, unknown>,
    warn = false,
  ): void => {
    if (sink.isLevelEnabled?.(warn ? 'warn' : 'info') === false) return;
    const { prefix, principal } = options.splitScope(event.scope);
    const fields = {
      audit: 'idempotency',
      decision,
      principal: options.maskPrincipal(principal),
      prefix: logText(prefix),
      key: logText(event.key),
      ...(event.method === undefined ? {} : { method: logText(event.method) }),
      ...(event.route === undefined ? {} : { route: logText(event.route) }),
      ...details,
    };
    if (warn) sink.warn(fields, `idempotency key ${decision}`);
    else sink.info(fields, `idempotency key ${decision}`);
  };

  return (event: IdempotencyEvent) => {
    switch (event.type) {
      case 'reserved':
        return line(event.tookOver ? 'lease-taken-over' : 'reserved', event, {
          durationMs: round(event.elapsedMs),
        });
      case 'replayed':
        return line('replayed', event, { status: event.status, durationMs: round(event.elapsedMs) });
      case 'mismatch':
        return line('mismatch', event, { status: event.status, durationMs: round(event.elapsedMs) });
      case 'conflict':
        return line('in-flight', event, {
          status: event.status,
          waited: event.waited,
          durationMs: round(event.elapsedMs),
        });
      case 'finalized':
        return line('finalized', event, { status: event.status, durationMs: round(event.executionMs) });
      case 'released':
        return line('released', event, {
          reason: event.reason,
          ...(event.status === undefined ? {} : { status: event.status }),
          durationMs: round(event.executionMs),
        });
      case 'held':
        return line('held', event, { reason: event.reason, durationMs: round(event.executionMs) }, true);
      case 'lease-lost':
        return line(
          'lease-lost',
          event,
          {
            phase: event.phase,
            ...(event.status === undefined ? {} : { status: event.status }),
            durationMs: round(event.executionMs),
          },
          true,
        );
      case 'store-error':
        if (event.scope === undefined || event.key === undefined) return;
        return line(
          'store-unavailable',
          { ...event, scope: event.scope, key: event.key },
          {
            operation: event.operation,
            failedOpen: event.failedOpen,
            ...(event.status === undefined ? {} : { status: event.status }),
            durationMs: round(event.durationMs),
          },
          true,
        );
      case 'store-limit':
        return line('store-limit', event, {
          operation: event.operation,
          ...(event.status === undefined ? {} : { status: event.status }),
        });
      default:
        return;
    }
  };
}
