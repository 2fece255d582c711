import { trace } from '@opentelemetry/api';
import type { FastifyServerOptions } from 'fastify';
import pretty from 'pino-pretty';
import type { ServerConfig } from '../config.js';

/** Fields of the request line (request-log.ts) that its pretty message already says. */
const REQUEST_LINE_FIELDS = [
  'reqId',
  'method',
  'url',
  'statusCode',
  'responseTimeMs',
  'idempotencyKey',
  'replayed',
  'errorType',
  'errorMessage',
  'aborted',
];
/** Fields of the start line and the database's attempts (main.ts) that their messages already say. */
const START_LINE_FIELDS = [
  'address',
  'database',
  'warehouse',
  'databaseState',
  'attempt',
  'retryInMs',
  'cause',
];

/** The trace and span of the active span (when tracing is on), on every log line: logs and traces meet. */
export function traceFields(): Record<string, string> {
  const span = trace.getActiveSpan();
  if (span === undefined) return {};
  const { traceId, spanId } = span.spanContext();
  return { trace_id: traceId, span_id: spanId };
}

/** `true` when lines should be made for a person: asked for, or `auto` on a terminal. */
export function readableLogs(config: ServerConfig, stdout: { isTTY?: boolean } = process.stdout): boolean {
  const { logFormat } = config.observability;
  return logFormat === 'pretty' || (logFormat === 'auto' && stdout.isTTY === true);
}

/**
 * Fastify's logger options: JSON lines (one object a line, what a log shipper wants), or pino-pretty's
 * readable lines when a person reads them on a terminal. Pretty-printing runs in the process (no transport
 * worker to resolve from Fastify's own dependencies), which is fine at a terminal's pace.
 */
export function loggerOptions(
  config: ServerConfig,
  stdout: NodeJS.WritableStream & { isTTY?: boolean } = process.stdout,
): NonNullable<Exclude<FastifyServerOptions['logger'], boolean>> {
  const base = { level: config.logLevel, mixin: traceFields };
  // pino's own writer on the process's stdout (fd 1) is faster than a stream; another stream is a test's.
  if (!readableLogs(config, stdout)) return stdout === process.stdout ? base : { ...base, stream: stdout };
  return {
    ...base,
    stream: pretty({
      colorize: stdout.isTTY === true,
      destination: stdout,
      // One line per entry: the request line's facts are in its message (observability/request-log.ts), so
      // its fields are not printed again; any other entry's fields follow on the same line.
      singleLine: true,
      translateTime: 'SYS:HH:MM:ss.l',
      ignore: `pid,hostname,${REQUEST_LINE_FIELDS.join(',')},${START_LINE_FIELDS.join(',')}`,
    }),
  };
}
