import { validate, version } from 'uuid';
import { abortReason } from './abort.js';
import { recordOutcome } from './call-outcome.js';
import { ClientErrorCode, IdemClientError } from './errors.js';
import { keyLifetimeSource } from './key-lifetime.js';
import { newIdempotencyKey } from './new-key.js';
import {
  type IdempotentFetchOptions,
  type ResolvedOptions,
  resolveOptions,
  SAFE_METHODS,
} from './options.js';
import { buildTemplate, callSignal, discardBody, isRequest } from './request-template.js';
import { runAttempts } from './run-attempts.js';

/** A function with fetch's signature, usable wherever a fetch is: `(input, init) => Promise<Response>`. */
export type IdempotentFetch = (input: string | URL | Request, init?: RequestInit) => Promise<Response>;

/** The time inside a UUIDv7 key (its first 48 bits, epoch ms), or `undefined` for any other key. */
function uuidV7TimeMs(key: string): number | undefined {
  if (!validate(key) || version(key) !== 7) return undefined;
  return Number.parseInt(key.slice(0, 8) + key.slice(9, 13), 16);
}

/** The GET of `/v1/config`, retried as any safe request is; it carries the caller's `Authorization`. */
async function readConfig(
  options: ResolvedOptions,
  url: URL,
  authorization: string | null,
  signal: AbortSignal,
) {
  const headers = new Headers({ accept: 'application/json' });
  if (authorization !== null) headers.set('authorization', authorization);
  const template = await buildTemplate(
    url.href,
    { method: 'GET', headers, signal },
    { maxBufferBytes: 0, timeoutMs: undefined },
  );
  return runAttempts(options, { template, key: undefined, keyExpiresAtMs: Number.POSITIVE_INFINITY });
}

/**
 * The error of a call whose key is past its lifetime before its first attempt: the same bound as the one that
 * stops retries (`gaveUp: 'key-lifetime'`), met before anything was sent.
 */
function keyExpired(
  key: string,
  headerName: string,
  issuedAtMs: number,
  lifetimeMs: number,
): IdemClientError {
  const error = new IdemClientError(
    ClientErrorCode.KeyExpired,
    `the ${headerName} ${key} (from ${new Date(issuedAtMs).toISOString()}) is past its lifetime of ${lifetimeMs} ms: ` +
      'the server may have forgotten it, so it is not sent (nothing was sent; call again with a fresh key)',
  );
  recordOutcome(error, { key, attempts: 0, replayed: false, elapsedMs: 0, gaveUp: 'key-lifetime' });
  return error;
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
  const lifetimeOf = keyLifetimeSource(
    resolved.keyLifetimeMs,
    resolved.discoverKeyLifetime,
    (url, auth, signal) => readConfig(resolved, url, auth, signal),
  );

  return async function idempotentFetch(input, init) {
    const request = isRequest(input) ? input : undefined;
    const method = (init?.method ?? request?.method ?? 'GET').toUpperCase();
    const keyed = resolved.methods.has(method);
    if (!keyed && !(resolved.retrySafeMethods && SAFE_METHODS.has(method)))
      return resolved.fetch(input, init);
    const signal = callSignal(input, init);
    const limits = { maxBufferBytes: resolved.maxBufferBytes, timeoutMs: resolved.attemptTimeoutMs };
    if (!keyed) {
      const template = await buildTemplate(input, init, limits);
      return runAttempts(resolved, { template, key: undefined, keyExpiresAtMs: Number.POSITIVE_INFINITY });
    }

    const { headerName, clock } = resolved;
    const callerHeaders = new Headers(init?.headers ?? request?.headers);
    let lifetimeMs: number;
    try {
      if (signal?.aborted) throw abortReason(signal);
      const lifetime = await lifetimeOf(callerHeaders.get('authorization'), signal);
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
    } catch (error) {
      // Rejected on an abort before its body was read: the body is cancelled, as fetch cancels it.
      if (signal?.aborted) discardBody(init?.body, abortReason(signal));
      throw error;
    }

    // A caller's key may have been used before this call: its lifetime counts from when it was minted, and
    // one already past it is never sent (checked before the body is read, and again once it was: reading a
    // slow stream takes time).
    const callerKey = callerHeaders.get(headerName);
    const mintedAtMs = callerKey === null ? undefined : uuidV7TimeMs(callerKey);
    const refuseExpired = (nowMs: number) => {
      if (
        callerKey !== null &&
        mintedAtMs !== undefined &&
        mintedAtMs < nowMs &&
        nowMs >= mintedAtMs + lifetimeMs
      )
        throw keyExpired(callerKey, headerName, mintedAtMs, lifetimeMs);
    };
    refuseExpired(clock.nowMs());
    const template = await buildTemplate(input, init, limits);
    let key = template.headers.get(headerName);
    if (key === null) {
      key = newIdempotencyKey();
      template.headers.set(headerName, key);
    }
    const nowMs = clock.nowMs();
    refuseExpired(nowMs);
    const issuedAtMs = Math.min(nowMs, uuidV7TimeMs(key) ?? nowMs);
    return runAttempts(resolved, { template, key, keyExpiresAtMs: issuedAtMs + lifetimeMs });
  };
}
