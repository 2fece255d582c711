import type { FastifyInstance } from 'fastify';
import pino from 'pino';
import type { ServerConfig } from '../config.js';
import { splitScope } from '../idempotency/scope.js';
import { type AuditSink, createAuditLog } from './audit-log.js';
import { readableLogs, traceFields } from './logger.js';
import { principalMasker } from './principal-mask.js';

/**
 * The audit log's listener: lines go to the server log, or with `AUDIT_LOG_FILE` to their own file (JSON
 * lines, ISO timestamps, written synchronously: an audit line is not lost to a crash).
 */
export function openAuditLog(app: FastifyInstance, config: ServerConfig, readable = readableLogs(config)) {
  const { file, hashKey } = config.observability.audit;
  let sink: AuditSink = app.log;
  if (file === undefined && readable) {
    // A person reading the terminal wants one line per request, and the request line says the key and whether
    // it was replayed: the key's decisions are debug entries there (LOG_LEVEL=debug shows them; AUDIT_LOG_FILE
    // keeps them all). Warnings (a lost lease, the store down) stay warnings.
    const log = app.log;
    sink = {
      info: (fields, message) => log.debug(fields, message),
      warn: (fields, message) => log.warn(fields, message),
      isLevelEnabled: (level) => (log as pino.Logger).isLevelEnabled(level === 'info' ? 'debug' : level),
    };
  } else if (file !== undefined) {
    const destination = pino.destination({ dest: file, mkdir: true, sync: true });
    sink = pino({ base: null, timestamp: pino.stdTimeFunctions.isoTime, mixin: traceFields }, destination);
    app.addHook('onClose', async () => destination.end());
  }
  return createAuditLog(sink, { maskPrincipal: principalMasker(hashKey), splitScope });
}
