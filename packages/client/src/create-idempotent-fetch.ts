import { v7 as uuidv7, validate, version } from 'uuid';
import { raceAbort } from './abort.js';
import { recordOutcome } from './call-outcome.js';
import { keyLifetimeSource } from './key-lifetime.js';
import {
  type IdempotentFetchOptions,
  type ResolvedOptions,
  resolveOptions,
  SAFE_METHODS,
} from './options.js';
import { buildTemplate, isRequest } from './request-template.js';
import { runAttempts } from './run-attempts.js';

/** A function with fetch's signature, usable wherever a fetch is: `(input, init) => Promise<Response>`. */
export type IdempotentFetch = (input: string | URL | Request, init?: RequestInit) => Promise<Response>;

/** The time inside a UUIDv7 key (its first 48 bits, epoch ms), or `undefined` for any other key. */
function uuidV7TimeMs(key: string): number | undefined {
  if (!validate(key) || version(key) !== 7) return undefined;
  return Number.parseInt(key.slice(0, 8) + key.slice(9, 13), 16);
}

/** The GET of `/v1/config`, retried as any safe request is; it carries the caller's `Authorization`. */
async function readConfig(options: ResolvedOptions, url: URL, authorization: string | null) {
  const headers = new Headers({ accept: 'application/json' });
  if (authorization !== null) headers.set('authorization', authorization);
  const template = await buildTemplate(url.href, { method: 'GET', headers }, 0);
  return runAttempts(options, { template, key: undefined, keyExpiresAtMs: Number.POSITIVE_INFINITY });
}

/**
 * Create a fetch that makes mutations safe to retry. For a method in `methods` (POST, PUT, PATCH, DELETE) it
 * adds an `Idempotency-Key` (a fresh UUIDv7, or the caller's own when the request has one), sends every retry
 * of the call with that same key and body, and retries network errors, 429, 502, 503, 504 and an "in
 * progress" 409, with exponential backoff and full jitter, honouring `Retry-After`, until an answer is final
 * or `maxAttempts`, `maxElapsedMs` or the key's lifetime says stop (then the last answer is returned, or the
 * last network error thrown). The caller's `AbortSignal` stops it at once. Other 4xx are never retried.
 *
 * The answer is the server's own `Response`; {@link isReplay} says whether it is a replay of an earlier
 * attempt's execution, and {@link callOutcome} how the call went.
 *
 * @param options see {@link IdempotentFetchOptions}; every one has a default.
 * @example
 * const idempotentFetch = createIdempotentFetch({ maxAttempts: 8 });
 * const response = await idempotentFetch('https://api.example.com/orders', {
 *   method: 'POST',
 *   headers: { 'content-type': 'application/json' },
 *   body: JSON.stringify({ item: 'book' }),
 * });
 */
export function createIdempotentFetch(options: IdempotentFetchOptions = {}): IdempotentFetch {
  const resolved = resolveOptions(options);
  const lifetimeOf = keyLifetimeSource(resolved.keyLifetimeMs, resolved.discoverKeyLifetime, (url, auth) =>
    readConfig(resolved, url, auth),
  );

  return async function idempotentFetch(input, init) {
    const request = isRequest(input) ? input : undefined;
    const method = (init?.method ?? request?.method ?? 'GET').toUpperCase();
    const keyed = resolved.methods.has(method);
    if (!keyed && !(resolved.retrySafeMethods && SAFE_METHODS.has(method)))
      return resolved.fetch(input, init);

    let lifetimeMs = Number.POSITIVE_INFINITY;
    if (keyed) {
      const signal = init?.signal === undefined ? request?.signal : (init.signal ?? undefined);
      const authorization = new Headers(init?.headers ?? request?.headers).get('authorization');
      const lifetime = await raceAbort(lifetimeOf(authorization), signal);
      if (lifetime === 'unsupported') {
        // The server ignores keys: a retried mutation could run twice. It goes once, as the caller wrote it.
        const response = await resolved.fetch(input, init);
        recordOutcome(response, {
          key: undefined,
          attempts: 1,
          replayed: false,
          elapsedMs: 0,
          gaveUp: 'keys-unsupported',
        });
        return response;
      }
      lifetimeMs = lifetime;
    }

    const template = await buildTemplate(input, init, resolved.maxBufferBytes);
    if (!keyed) return runAttempts(resolved, { template, key: undefined, keyExpiresAtMs: lifetimeMs });
    const { headerName, clock } = resolved;
    let key = template.headers.get(headerName);
    if (key === null) {
      key = uuidv7();
      template.headers.set(headerName, key);
    }
    // A caller's key may have been used before this call: its lifetime counts from when it was minted.
    const nowMs = clock.nowMs();
    const issuedAtMs = Math.min(nowMs, uuidV7TimeMs(key) ?? nowMs);
    return runAttempts(resolved, { template, key, keyExpiresAtMs: issuedAtMs + lifetimeMs });
  };
}
