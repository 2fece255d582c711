/** The one clock of the client: the current time in epoch milliseconds. */
export interface Clock {
  nowMs(): number;
}

/**
 * Any function that fetches like the standard `fetch`: Node's, a browser's, undici's, or another wrapper.
 * The client calls it with the caller's own input (a URL string, a `URL`, or a `Request`) and an init object.
 */
export type FetchFunction = (input: string | URL | Request, init?: RequestInit) => Promise<Response>;

/** Why an attempt is retried: the answer's status, or the network error the attempt failed with. */
export type RetryReason =
  | { readonly kind: 'status'; readonly status: number }
  | { readonly kind: 'error'; readonly error: unknown };

/** Reported to `onRetry` before the client waits for the next attempt of one call. */
export interface RetryEvent {
  /** The attempt that just failed, counted from 1. */
  readonly attempt: number;
  /** How long the client waits before the next attempt, in ms. */
  readonly delayMs: number;
  readonly method: string;
  readonly url: string;
  /** The key every attempt of this call carries; `undefined` for a safe method (retried without one). */
  readonly key: string | undefined;
  readonly reason: RetryReason;
}

/** Options of {@link createIdempotentFetch}; every one has a default. */
export interface IdempotentFetchOptions {
  /** The fetch that sends each attempt. @default `globalThis.fetch`, looked up at each call */
  readonly fetch?: FetchFunction;
  /** Methods that get an `Idempotency-Key` and are retried with it. @default ['POST', 'PUT', 'PATCH', 'DELETE'] */
  readonly methods?: readonly string[];
  /**
   * Retry GET, HEAD and OPTIONS too (without a key: HTTP defines them as safe to repeat). Other methods that
   * are not in `methods` always go once, untouched. @default true
   */
  readonly retrySafeMethods?: boolean;
  /** Attempts per call, the first one included (at least 1). @default 5 */
  readonly maxAttempts?: number;
  /** The first backoff ceiling, in ms; each retry doubles it (full jitter: a random wait up to it). @default 100 */
  readonly baseDelayMs?: number;
  /** The largest backoff ceiling, in ms. A longer `Retry-After` is still honoured. @default 10_000 */
  readonly maxDelayMs?: number;
  /** No attempt starts later than this after the first one, in ms. @default 60_000 */
  readonly maxElapsedMs?: number;
  /**
   * Abort an attempt whose response headers have not arrived after this long, in ms, and retry it like a
   * network error. Reading a one-shot body (or encoding a `FormData`) into memory before the first attempt is
   * bounded by it too: the call then rejects with its `TimeoutError` (the body cannot be read again), and
   * nothing is sent. @default none (the caller's `AbortSignal` is the only bound on one attempt)
   */
  readonly attemptTimeoutMs?: number;
  /**
   * How long a key may be reused, in ms from its first use (from the time inside a UUIDv7 key, when the caller
   * brought one): no retry starts after it, and a caller's key already past it is refused before the first
   * attempt (`IDEMPOTENCY_KEY_EXPIRED`). Keep it at most the server's key lifetime. @default 1_800_000 (30 min)
   */
  readonly keyLifetimeMs?: number;
  /**
   * An Iceberg REST catalog's base URL (`http://host:8181`, or with its path prefix): the lifetime is read
   * once from `GET {url}/v1/config` (`idempotency-key-lifetime`) and replaces `keyLifetimeMs`. A catalog that
   * advertises none does not support keys: mutations then go once, as written (no key added). @default none
   */
  readonly discoverKeyLifetime?: string | URL;
  /** Statuses that are always retried (a 409 is retried only when it says "in progress"). @default [429, 502, 503, 504] */
  readonly retryOn?: readonly number[];
  /** The header that carries the key. @default 'Idempotency-Key' */
  readonly headerName?: string;
  /**
   * A one-shot body (a `ReadableStream`, an async iterable, a `Request`'s body) and the encoding of a
   * `FormData` are read into memory up to this many bytes so that they can be sent again, the same bytes each
   * time; a longer one is streamed once and never retried. @default 1_048_576
   */
  readonly maxBufferBytes?: number;
  /** Told before each wait for a retry. It must not throw (a throw is ignored). */
  readonly onRetry?: (event: RetryEvent) => void;
  /** Random numbers in [0, 1) for the jitter. @default Math.random */
  readonly random?: () => number;
  /** The clock of backoff budgets, key lifetimes and `Retry-After` dates. @default the system clock */
  readonly clock?: Clock;
}

/** The options with every default applied and checked: resolved once, where the fetch is created. */
export interface ResolvedOptions {
  readonly fetch: FetchFunction;
  readonly methods: ReadonlySet<string>;
  readonly retrySafeMethods: boolean;
  readonly maxAttempts: number;
  readonly baseDelayMs: number;
  readonly maxDelayMs: number;
  readonly maxElapsedMs: number;
  readonly attemptTimeoutMs: number | undefined;
  readonly keyLifetimeMs: number;
  readonly discoverKeyLifetime: URL | undefined;
  readonly retryOn: ReadonlySet<number>;
  readonly headerName: string;
  readonly maxBufferBytes: number;
  readonly onRetry: (event: RetryEvent) => void;
  readonly random: () => number;
  readonly clock: Clock;
}

/** The methods that get a key by default: those that change something on the server. */
export const DEFAULT_METHODS = ['POST', 'PUT', 'PATCH', 'DELETE'] as const;
/** The statuses retried by default: too many requests, and a gateway or server that is briefly unavailable. */
export const DEFAULT_RETRY_ON = [429, 502, 503, 504] as const;
/** Methods HTTP defines as safe: repeating them changes nothing on the server. */
export const SAFE_METHODS: ReadonlySet<string> = new Set(['GET', 'HEAD', 'OPTIONS']);

const systemClock: Clock = { nowMs: () => Date.now() };
// A header name is an HTTP token (RFC 9110 §5.1).
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

function count(name: string, value: number | undefined, fallback: number, min: number): number {
  const resolved = value ?? fallback;
  if (!Number.isSafeInteger(resolved) || resolved < min) {
    throw new RangeError(`${name} must be an integer of at least ${min}, got ${String(value)}`);
  }
  return resolved;
}

function durationMs(name: string, value: number | undefined, fallback: number): number {
  const resolved = value ?? fallback;
  if (!Number.isFinite(resolved) || resolved < 0) {
    throw new RangeError(`${name} must be a finite number of ms, at least 0, got ${String(value)}`);
  }
  return resolved;
}

/** Apply the defaults and check every option; throws `RangeError` / `TypeError` on a bad one. */
export function resolveOptions(options: IdempotentFetchOptions): ResolvedOptions {
  const headerName = options.headerName ?? 'Idempotency-Key';
  if (!TOKEN.test(headerName)) throw new TypeError(`headerName must be an HTTP token, got ${headerName}`);
  const attemptTimeoutMs = options.attemptTimeoutMs;
  if (attemptTimeoutMs !== undefined && !(attemptTimeoutMs > 0 && Number.isFinite(attemptTimeoutMs))) {
    throw new RangeError(`attemptTimeoutMs must be a positive number of ms, got ${attemptTimeoutMs}`);
  }
  const keyLifetimeMs = durationMs('keyLifetimeMs', options.keyLifetimeMs, 30 * 60_000);
  const retryOn = options.retryOn ?? DEFAULT_RETRY_ON;
  for (const status of retryOn) {
    if (!Number.isInteger(status) || status < 100 || status > 599)
      throw new RangeError(`retryOn holds HTTP statuses, got ${status}`);
  }
  const fetchFunction = options.fetch;
  const onRetry = options.onRetry;
  return {
    // The global one is looked up at each call, so that a fetch installed later (a test's mock, a polyfill) is
    // the one used. A given one is called as a plain function: a browser's fetch refuses any other `this`.
    fetch:
      fetchFunction === undefined
        ? (input, init) => globalThis.fetch(input, init)
        : (input, init) => fetchFunction(input, init),
    methods: new Set((options.methods ?? DEFAULT_METHODS).map((method) => method.toUpperCase())),
    retrySafeMethods: options.retrySafeMethods ?? true,
    maxAttempts: count('maxAttempts', options.maxAttempts, 5, 1),
    baseDelayMs: durationMs('baseDelayMs', options.baseDelayMs, 100),
    maxDelayMs: durationMs('maxDelayMs', options.maxDelayMs, 10_000),
    maxElapsedMs: durationMs('maxElapsedMs', options.maxElapsedMs, 60_000),
    attemptTimeoutMs,
    keyLifetimeMs,
    discoverKeyLifetime:
      options.discoverKeyLifetime === undefined ? undefined : new URL(String(options.discoverKeyLifetime)),
    retryOn: new Set(retryOn),
    headerName,
    maxBufferBytes: count('maxBufferBytes', options.maxBufferBytes, 1024 * 1024, 0),
    onRetry: (event) => {
      try {
        onRetry?.(event);
      } catch {
        // A listener must never change how a call ends.
      }
    },
    random: options.random ?? Math.random,
    clock: options.clock ?? systemClock,
  };
}
