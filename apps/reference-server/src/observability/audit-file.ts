import type { FastifyInstance } from 'fastify';
import pino from 'pino';
import type { ServerConfig } from '../config.js';
import { type AuditSink, createAuditLog } from './audit-log.js';
import { traceFields } from './logger.js';
import { principalMasker } from './principal-mask.js';
import { splitScope } from './scope.js';

/**
 * The audit log's listener: lines go to the server log, or with `AUDIT_LOG_FILE` to their own file (JSON
 * lines, ISO timestamps, written synchronously: an audit line is not lost to a crash).
 */
export function openAuditLog(app: FastifyInstance, config: ServerConfig) {
  const { file, hashKey } = config.observability.audit;
  let sink: AuditSink = app.log;
  if (file !== undefined) {
    const destination = pino.destination({ dest: file, mkdir: true, sync: true });
    sink = pino({ base: null, timestamp: pino.stdTimeFunctions.isoTime, mixin: traceFields }, destination);
    app.addHook('onClose', async () => destination.end());
  }
  return createAuditLog(sink, { maskPrincipal: principalMasker(hashKey), splitScope });
}
