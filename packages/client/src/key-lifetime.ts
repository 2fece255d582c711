import { raceAbort } from './abort.js';
import { ClientErrorCode, IdemClientError } from './errors.js';
import { parseIsoDurationMs } from './iso-duration.js';

/** The field of an Iceberg catalog's `GET /v1/config` answer that holds the key lifetime. */
export const LIFETIME_FIELD = 'idempotency-key-lifetime';

/** The key lifetime in ms, or `'unsupported'` when the server advertises none (it ignores keys). */
export type KeyLifetime = number | 'unsupported';

/** `GET {base}/v1/config`: the base keeps its path (a catalog mounted under a prefix). */
export function configUrl(base: URL): URL {
  const url = new URL(base.href);
  url.pathname = `${url.pathname.replace(/\/+$/, '')}/v1/config`;
  return url;
}

/** Read the lifetime out of a `/v1/config` answer; throws when the answer is not a catalog config. */
export async function lifetimeFromConfig(response: Response): Promise<KeyLifetime> {
  if (!response.ok) {
    response.body?.cancel().catch(() => {});
    throw new Error(`GET /v1/config answered ${response.status}`);
  }
  const config = (await response.json()) as Record<string, unknown> | null;
  if (typeof config !== 'object' || config === null) throw new Error('GET /v1/config is not a JSON object');
  const advertised = config[LIFETIME_FIELD];
  // The spec: "If absent, clients MUST assume idempotency is not supported."
  if (advertised === undefined) return 'unsupported';
  const lifetimeMs = typeof advertised === 'string' ? parseIsoDurationMs(advertised) : undefined;
  if (lifetimeMs === undefined) {
    throw new Error(`${LIFETIME_FIELD} is not an ISO-8601 duration: ${JSON.stringify(advertised)}`);
  }
  return lifetimeMs;
}

/** One read of the config, shared by the calls that wait for it. */
interface Read {
  readonly lifetime: Promise<KeyLifetime>;
  readonly controller: AbortController;
  waiting: number;
  settled: boolean;
}

/**
 * The key lifetime of every call: the configured one, or the one a catalog advertises, read once and kept.
 * A failed read is not kept (the next call tries again) and fails the call that needed it with
 * `IDEMPOTENCY_LIFETIME_UNKNOWN`: without the lifetime, no retry can be known to be safe. A call's abort ends
 * its wait at once; once every call waiting for a read has aborted, the read itself is aborted (no retry or
 * timer of it outlives its callers) and the next call reads again.
 */
export function keyLifetimeSource(
  fixedMs: number,
  discoverFrom: URL | undefined,
  readConfig: (url: URL, authorization: string | null, signal: AbortSignal) => Promise<Response>,
): (authorization: string | null, signal: AbortSignal | undefined) => Promise<KeyLifetime> {
  if (discoverFrom === undefined) return () => Promise.resolve(fixedMs);
  const url = configUrl(discoverFrom);
  let known: Promise<KeyLifetime> | undefined;
  let current: Read | undefined;
  const start = (authorization: string | null): Read => {
    const controller = new AbortController();
    const read: Read = {
      lifetime: readConfig(url, authorization, controller.signal)
        .then(lifetimeFromConfig)
        .then(
          (lifetime) => {
            read.settled = true;
            return lifetime;
          },
          (error: unknown) => {
            read.settled = true;
            if (current === read) current = undefined;
            throw new IdemClientError(
              ClientErrorCode.LifetimeUnknown,
              `could not read the key lifetime from ${url.href}: ${error instanceof Error ? error.message : String(error)}`,
              { cause: error },
            );
          },
        ),
      controller,
      waiting: 0,
      settled: false,
    };
    // A read every caller left is rejected with nobody to hear it.
    read.lifetime.catch(() => {});
    return read;
  };
  return async (authorization, signal) => {
    if (known !== undefined) return known;
    current ??= start(authorization);
    const read = current;
    read.waiting++;
    try {
      const lifetime = await raceAbort(read.lifetime, signal);
      known = read.lifetime;
      return lifetime;
    } finally {
      read.waiting--;
      if (read.waiting === 0 && !read.settled) {
        read.controller.abort();
        if (current === read) current = undefined;
      }
    }
  };
}
