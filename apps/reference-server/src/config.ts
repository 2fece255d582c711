import { readFileSync } from 'node:fs';
import { MAX_PRINCIPAL_CHARS, textProblem } from './catalog/limits.js';
import { databaseUrl as parseDatabaseUrl } from './database/database-url.js';
import { type IdempotencyStoreConfig, idempotencyStoreSettings } from './idempotency/store-settings.js';
import { type ObservabilityConfig, observabilitySettings } from './observability/settings.js';
import { quoted, SettingError } from './setting-error.js';

/** Every setting of the server, from environment variables (see the README for the table). */
export interface ServerConfig {
  readonly host: string;
  readonly port: number;
  /** `sqlite:<file>` (default), `postgres://…` or `mysql://…`. */
  readonly databaseUrl: string;
  /** Local directory where table and view metadata files are written; no client location leaves it. */
  readonly warehouse: string;
  /** Bounds on reading a metadata file a client registers. */
  readonly metadataFiles: {
    readonly maxBytes: number;
    readonly readTimeoutMs: number;
  };
  /** The longest a client may take to send a whole request. */
  readonly requestTimeoutMs: number;
  /** Bounds on every database call, so that a hung or partitioned database answers 503 in time. */
  readonly database: {
    /** The longest one statement runs (server side) and waits for its answer (client side). */
    readonly statementTimeoutMs: number;
    /** The longest a request waits to get a connection (opening one included). */
    readonly acquireTimeoutMs: number;
    /**
     * How long the database keeps a transaction whose node has gone silent (stalled, partitioned) before it
     * ends the session and rolls it back, freeing its key and rows.
     */
    readonly idleTransactionTimeoutMs: number;
    /** The longest pause between two attempts to reach the database at startup (exponential backoff). */
    readonly retryMaxDelayMs: number;
    /** The most connections a node keeps open to a PostgreSQL or MySQL database. */
    readonly poolSize: number;
  };
  /** On SIGTERM, how long requests in flight may take to finish before the process exits anyway. */
  readonly shutdownDrainMs: number;
  readonly idempotency: {
    readonly enabled: boolean;
    /** ISO-8601 duration advertised as `idempotency-key-lifetime`. */
    readonly lifetime: string;
    readonly lifetimeMs: number;
    readonly leaseMs: number;
    /** How long an in-flight duplicate waits before the retryable 503. */
    readonly maxWaitMs: number;
    /** Added to the lifetime before a record may be purged (clock skew between nodes). */
    readonly graceMs: number;
    /** Where the records live, and so how a key is fenced (IDEMPOTENCY_STORE, IDEMPOTENCY_STORE_URL). */
    readonly store: IdempotencyStoreConfig;
    /**
     * Completed records each node keeps in memory, so that a replay needs no transaction (0 entries: off).
     * Safe across nodes: a completed record never changes before it expires.
     */
    readonly replayCache: {
      readonly maxEntries: number;
      readonly maxBytes: number;
    };
    /**
     * Read a keyed mutation's record before its transaction, and answer a retry from that read (no
     * transaction); every fresh key pays the read. Undefined: the database decides (idempotency/plugin.ts).
     */
    readonly readBeforeTransaction: boolean | undefined;
    /** Expired records are deleted periodically, on every node (purging is safe concurrently). */
    readonly purge: {
      readonly enabled: boolean;
      readonly intervalMs: number;
      readonly batchSize: number;
    };
  };
  /** Bearer token → principal. Empty: everyone is the anonymous principal. */
  readonly tokens: ReadonlyMap<string, string>;
  readonly logLevel: string;
  /** Metrics, logs, the audit log, health checks and traces (`src/observability`). */
  readonly observability: ObservabilityConfig;
}

/** The catalog's database when DATABASE_URL is not set. */
export const DEFAULT_DATABASE_URL = 'sqlite:./data/catalog.db';

const DURATION = /^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$/;

/** Parse the ISO-8601 durations a catalog advertises (`PT30M`, `PT24H`, `P1D`, `PT1H30M`) into ms. */
export function parseDuration(text: string): number {
  const match = DURATION.exec(text);
  if (match === null || text === 'P' || text.endsWith('T')) {
    throw new SettingError(`not an ISO-8601 duration: ${quoted(text)} (expected e.g. PT30M)`);
  }
  const [, days, hours, minutes, seconds] = match;
  return (
    ((Number(days ?? 0) * 24 + Number(hours ?? 0)) * 60 + Number(minutes ?? 0)) * 60_000 +
    Number(seconds ?? 0) * 1000
  );
}

function parseTokens(text: string | undefined): Map<string, string> {
  const tokens = new Map<string, string>();
  for (const pair of (text ?? '')
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean)) {
    const at = pair.indexOf('=');
    if (at <= 0 || at === pair.length - 1)
      // The token is a secret: never quoted back.
      throw new SettingError(`AUTH_TOKENS entries are token=principal, got an entry without both`);
    const principal = pair.slice(at + 1);
    // The principal is part of every idempotency scope, which the store caps (see catalog/limits.ts).
    const problem =
      principal.length > MAX_PRINCIPAL_CHARS
        ? `must be at most ${MAX_PRINCIPAL_CHARS} characters`
        : textProblem(principal);
    if (problem !== undefined)
      throw new SettingError(`AUTH_TOKENS principal ${quoted(principal)} ${problem}`);
    tokens.set(pair.slice(0, at), principal);
  }
  return tokens;
}

function fileSettings(path: string | undefined): Record<string, string> {
  if (path === undefined || path === '') return {};
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const why =
      code === 'ENOENT'
        ? 'does not exist'
        : code === 'EISDIR'
          ? 'is a directory'
          : code === 'EACCES' || code === 'EPERM'
            ? 'cannot be read (permission denied)'
            : `cannot be read (${code ?? 'error'})`;
    throw new SettingError(`CONFIG_FILE ${quoted(path)} ${why}; it must name a JSON file of settings`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    // JSON.parse's message quotes the text: never printed, the file may be anything (a secret, /etc/shadow).
    throw new SettingError(`CONFIG_FILE ${quoted(path)} is not JSON; it must hold a JSON object of settings`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new SettingError(`CONFIG_FILE ${quoted(path)} must hold a JSON object of settings`);
  }
  return Object.fromEntries(
    Object.entries(parsed).map(([name, value]) => [
      name,
      typeof value === 'object' && value !== null ? JSON.stringify(value) : String(value),
    ]),
  );
}

function flag(name: string, text: string | undefined, fallback: boolean): boolean {
  return optionalFlag(name, text) ?? fallback;
}

/** A flag, or undefined when it is not set. */
function optionalFlag(name: string, text: string | undefined): boolean | undefined {
  if (text === undefined || text === '') return undefined;
  if (/^(1|true|yes|on)$/i.test(text)) return true;
  if (/^(0|false|no|off)$/i.test(text)) return false;
  throw new SettingError(`${name} must be true or false (also 1/0, yes/no, on/off), got ${quoted(text)}`);
}

function count(
  name: string,
  text: string | undefined,
  fallback: number,
  min = 1,
  max = Number.MAX_SAFE_INTEGER,
) {
  if (text === undefined || text === '') return fallback;
  // Decimal digits only: Number() would take ' 12 ', '0x10', '1e3' and '12.0'.
  const value = /^\d{1,16}$/.test(text) ? Number(text) : Number.NaN;
  if (!Number.isSafeInteger(value) || value < min || value > max) {
    const range = max === Number.MAX_SAFE_INTEGER ? `of at least ${min}` : `from ${min} to ${max}`;
    throw new SettingError(`${name} must be a whole number ${range}, got ${quoted(text)}`);
  }
  return value;
}

/** pino's levels, `silent` (nothing) included. */
export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

function logLevel(text: string | undefined): string {
  if (text === undefined || text === '') return 'info';
  if (!(LOG_LEVELS as readonly string[]).includes(text))
    throw new SettingError(`LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}, got ${quoted(text)}`);
  return text;
}

function host(text: string | undefined): string {
  if (text === undefined || text === '') return '127.0.0.1';
  if (!/^[A-Za-z0-9.:_-]{1,253}$/.test(text) && !/^\[[0-9A-Fa-f:.]+\]$/.test(text))
    throw new SettingError(
      `HOST must be an address or host name to listen on (e.g. 127.0.0.1, 0.0.0.0, ::), got ${quoted(text)}`,
    );
  return text.replace(/^\[(.*)\]$/, '$1');
}

function directory(name: string, text: string | undefined, fallback: string): string {
  if (text === undefined || text === '') return fallback;
  if (text.includes('\u0000'))
    throw new SettingError(`${name} must be a directory path, got one with a NUL character`);
  return text;
}

function lifetimeMs(text: string): number {
  try {
    const ms = parseDuration(text);
    if (ms < 1) throw new SettingError('zero');
    return ms;
  } catch {
    throw new SettingError(
      `IDEMPOTENCY_KEY_LIFETIME must be an ISO-8601 duration longer than zero (e.g. PT30M, PT24H, P1D), got ${quoted(text)}`,
    );
  }
}

/**
 * Read the settings: the JSON file named by `CONFIG_FILE` (an object of the same names, e.g.
 * `{ "PORT": 8282, "AUTH_TOKENS": "t1=alice" }`), overridden by the environment.
 */
export function loadConfig(environment: NodeJS.ProcessEnv = process.env): ServerConfig {
  const env = { ...fileSettings(environment.CONFIG_FILE), ...environment };
  const lifetime = env.IDEMPOTENCY_KEY_LIFETIME || 'PT30M';
  const databaseUrl = env.DATABASE_URL
    ? parseDatabaseUrl('DATABASE_URL', env.DATABASE_URL)
    : DEFAULT_DATABASE_URL;
  return {
    host: host(env.HOST),
    port: count('PORT', env.PORT, 8181, 0, 65_535),
    databaseUrl,
    warehouse: directory('WAREHOUSE', env.WAREHOUSE, './data/warehouse'),
    metadataFiles: {
      maxBytes: count('METADATA_MAX_BYTES', env.METADATA_MAX_BYTES, 16 * 1024 * 1024),
      readTimeoutMs: count('METADATA_READ_TIMEOUT_MS', env.METADATA_READ_TIMEOUT_MS, 10_000),
    },
    requestTimeoutMs: count('REQUEST_TIMEOUT_MS', env.REQUEST_TIMEOUT_MS, 30_000),
    database: {
      statementTimeoutMs: count('DATABASE_STATEMENT_TIMEOUT_MS', env.DATABASE_STATEMENT_TIMEOUT_MS, 10_000),
      acquireTimeoutMs: count('DATABASE_ACQUIRE_TIMEOUT_MS', env.DATABASE_ACQUIRE_TIMEOUT_MS, 5_000),
      idleTransactionTimeoutMs: count(
        'DATABASE_IDLE_TRANSACTION_TIMEOUT_MS',
        env.DATABASE_IDLE_TRANSACTION_TIMEOUT_MS,
        10_000,
      ),
      retryMaxDelayMs: count('DATABASE_RETRY_MAX_DELAY_MS', env.DATABASE_RETRY_MAX_DELAY_MS, 5_000),
      poolSize: count('DATABASE_POOL_SIZE', env.DATABASE_POOL_SIZE, 10),
    },
    shutdownDrainMs: count('SHUTDOWN_DRAIN_MS', env.SHUTDOWN_DRAIN_MS, 10_000),
    idempotency: {
      enabled: flag('IDEMPOTENCY_ENABLED', env.IDEMPOTENCY_ENABLED, true),
      lifetime,
      lifetimeMs: lifetimeMs(lifetime),
      leaseMs: count('IDEMPOTENCY_LEASE_MS', env.IDEMPOTENCY_LEASE_MS, 30_000),
      maxWaitMs: count('IDEMPOTENCY_MAX_WAIT_MS', env.IDEMPOTENCY_MAX_WAIT_MS, 5_000),
      graceMs: count('IDEMPOTENCY_GRACE_MS', env.IDEMPOTENCY_GRACE_MS, 60_000, 0),
      store: idempotencyStoreSettings(env, {
        databaseUrl,
        poolSize: count('IDEMPOTENCY_POOL_SIZE', env.IDEMPOTENCY_POOL_SIZE, 10),
      }),
      replayCache: {
        maxEntries: count('IDEMPOTENCY_REPLAY_CACHE_ENTRIES', env.IDEMPOTENCY_REPLAY_CACHE_ENTRIES, 0, 0),
        maxBytes: count(
          'IDEMPOTENCY_REPLAY_CACHE_MAX_BYTES',
          env.IDEMPOTENCY_REPLAY_CACHE_MAX_BYTES,
          64 << 20,
        ),
      },
      readBeforeTransaction: optionalFlag(
        'IDEMPOTENCY_READ_BEFORE_TRANSACTION',
        env.IDEMPOTENCY_READ_BEFORE_TRANSACTION,
      ),
      purge: {
        enabled: flag('IDEMPOTENCY_PURGE_ENABLED', env.IDEMPOTENCY_PURGE_ENABLED, true),
        intervalMs: count('IDEMPOTENCY_PURGE_INTERVAL_MS', env.IDEMPOTENCY_PURGE_INTERVAL_MS, 60_000),
        batchSize: count('IDEMPOTENCY_PURGE_BATCH_SIZE', env.IDEMPOTENCY_PURGE_BATCH_SIZE, 1_000),
      },
    },
    tokens: parseTokens(env.AUTH_TOKENS),
    logLevel: logLevel(env.LOG_LEVEL),
    observability: observabilitySettings(env, environment),
  };
}
