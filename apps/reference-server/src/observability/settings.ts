import { quoted, SettingError } from '../setting-error.js';

/** The observability settings of the server (see the README's table). */
export interface ObservabilityConfig {
  /** Serve `GET /metrics` (Prometheus text). */
  readonly metrics: boolean;
  /** `auto`: readable (pino-pretty) when stdout is a terminal, JSON otherwise. */
  readonly logFormat: 'auto' | 'json' | 'pretty';
  readonly audit: {
    /** One structured line per idempotency key decision. */
    readonly enabled: boolean;
    /** Write the audit lines to this file instead of the server log. */
    readonly file: string | undefined;
    /** The HMAC key of the principal hash in audit lines; a random one per process when unset. */
    readonly hashKey: string | undefined;
  };
  /** The longest `/health`, `/ready` and `/readyz` wait for the database before they answer it is down. */
  readonly healthTimeoutMs: number;
  /** Export traces over OTLP: the standard `OTEL_*` variables of the environment ask for it. */
  readonly traces: boolean;
}

const LOG_FORMATS = ['auto', 'json', 'pretty'] as const;

function flag(name: string, text: string | undefined, fallback: boolean): boolean {
  if (text === undefined || text === '') return fallback;
  if (/^(1|true|yes|on)$/i.test(text)) return true;
  if (/^(0|false|no|off)$/i.test(text)) return false;
  throw new SettingError(`${name} must be true or false (also 1/0, yes/no, on/off), got ${quoted(text)}`);
}

function milliseconds(name: string, text: string | undefined, fallback: number): number {
  if (text === undefined || text === '') return fallback;
  const value = /^\d{1,16}$/.test(text) ? Number(text) : Number.NaN;
  if (!Number.isSafeInteger(value) || value < 1)
    throw new SettingError(`${name} must be a whole number of at least 1, got ${quoted(text)}`);
  return value;
}

/**
 * Whether the standard OpenTelemetry variables ask for trace export: an OTLP endpoint, or a traces exporter
 * other than `none`; never when `OTEL_SDK_DISABLED` is true. Nothing set: no SDK, nothing leaves the process.
 */
export function tracesWanted(environment: NodeJS.ProcessEnv): boolean {
  if (/^true$/i.test(environment.OTEL_SDK_DISABLED?.trim() ?? '')) return false;
  const exporters = (environment.OTEL_TRACES_EXPORTER ?? '')
    .split(',')
    .map((name) => name.trim())
    .filter((name) => name !== '');
  if (exporters.length > 0) return exporters.some((name) => name !== 'none');
  return Boolean(
    environment.OTEL_EXPORTER_OTLP_ENDPOINT?.trim() || environment.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim(),
  );
}

/**
 * Read the observability settings. `env` holds the server's settings (file and environment); the `OTEL_*`
 * variables are read from `environment` alone, as the OpenTelemetry SDK reads them.
 */
export function observabilitySettings(
  env: Record<string, string | undefined>,
  environment: NodeJS.ProcessEnv,
): ObservabilityConfig {
  const logFormat = env.LOG_FORMAT || 'auto';
  if (!(LOG_FORMATS as readonly string[]).includes(logFormat))
    throw new SettingError(`LOG_FORMAT must be one of ${LOG_FORMATS.join(', ')}, got ${quoted(logFormat)}`);
  return {
    metrics: flag('METRICS_ENABLED', env.METRICS_ENABLED, true),
    logFormat: logFormat as ObservabilityConfig['logFormat'],
    audit: {
      enabled: flag('AUDIT_LOG', env.AUDIT_LOG, true),
      file: env.AUDIT_LOG_FILE || undefined,
      hashKey: env.AUDIT_HASH_KEY || undefined,
    },
    healthTimeoutMs: milliseconds('HEALTH_TIMEOUT_MS', env.HEALTH_TIMEOUT_MS, 1_000),
    traces: tracesWanted(environment),
  };
}
