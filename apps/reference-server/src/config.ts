import { readFileSync } from 'node:fs';

/** Every setting of the server, from environment variables (see the README for the table). */
export interface ServerConfig {
  readonly host: string;
  readonly port: number;
  /** `sqlite:<file>` (default), `postgres://…` or `mysql://…`. */
  readonly databaseUrl: string;
  /** Local directory where table and view metadata files are written. */
  readonly warehouse: string;
  readonly idempotency: {
    readonly enabled: boolean;
    /** ISO-8601 duration advertised as `idempotency-key-lifetime`. */
    readonly lifetime: string;
    readonly lifetimeMs: number;
    readonly leaseMs: number;
    /** How long an in-flight duplicate waits before the retryable 503. */
    readonly maxWaitMs: number;
  };
  /** Bearer token → principal. Empty: everyone is the anonymous principal. */
  readonly tokens: ReadonlyMap<string, string>;
  readonly logLevel: string;
}

const DURATION = /^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$/;

/** Parse the ISO-8601 durations a catalog advertises (`PT30M`, `PT24H`, `P1D`, `PT1H30M`) into ms. */
export function parseDuration(text: string): number {
  const match = DURATION.exec(text);
  if (match === null || text === 'P' || text.endsWith('T')) {
    throw new Error(`not an ISO-8601 duration: ${JSON.stringify(text)} (expected e.g. PT30M)`);
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
      throw new Error(`AUTH_TOKENS entries are token=principal, got ${JSON.stringify(pair)}`);
    tokens.set(pair.slice(0, at), pair.slice(at + 1));
  }
  return tokens;
}

function fileSettings(path: string | undefined): Record<string, string> {
  if (path === undefined || path === '') return {};
  const parsed = JSON.parse(readFileSync(path, 'utf8')) as unknown;
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new Error(`CONFIG_FILE ${path} must hold a JSON object of settings`);
  }
  return Object.fromEntries(Object.entries(parsed).map(([name, value]) => [name, String(value)]));
}

function flag(text: string | undefined, fallback: boolean): boolean {
  if (text === undefined || text === '') return fallback;
  if (/^(1|true|yes|on)$/i.test(text)) return true;
  if (/^(0|false|no|off)$/i.test(text)) return false;
  throw new Error(`expected a boolean, got ${JSON.stringify(text)}`);
}

/**
 * Read the settings: the JSON file named by `CONFIG_FILE` (an object of the same names, e.g.
 * `{ "PORT": 8282, "AUTH_TOKENS": "t1=alice" }`), overridden by the environment.
 */
export function loadConfig(environment: NodeJS.ProcessEnv = process.env): ServerConfig {
  const env = { ...fileSettings(environment.CONFIG_FILE), ...environment };
  const lifetime = env.IDEMPOTENCY_KEY_LIFETIME ?? 'PT30M';
  return {
    host: env.HOST ?? '127.0.0.1',
    port: Number(env.PORT ?? 8181),
    databaseUrl: env.DATABASE_URL ?? 'sqlite:./data/catalog.db',
    warehouse: env.WAREHOUSE ?? './data/warehouse',
    idempotency: {
      enabled: flag(env.IDEMPOTENCY_ENABLED, true),
      lifetime,
      lifetimeMs: parseDuration(lifetime),
      leaseMs: Number(env.IDEMPOTENCY_LEASE_MS ?? 30_000),
      maxWaitMs: Number(env.IDEMPOTENCY_MAX_WAIT_MS ?? 5_000),
    },
    tokens: parseTokens(env.AUTH_TOKENS),
    logLevel: env.LOG_LEVEL ?? 'info',
  };
}
