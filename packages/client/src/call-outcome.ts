/** The header an idem server (and many others) sets on an answer replayed from an earlier execution. */
export const REPLAYED_HEADER = 'idempotent-replayed';

/** Why the client stopped retrying while the last answer (or error) was still a retryable one. */
export type GaveUp =
  /** `maxAttempts` were made. */
  | 'max-attempts'
  /** The next attempt would have started after `maxElapsedMs`. */
  | 'max-elapsed'
  /** The next attempt would have started after the key's lifetime: the key is never reused past it. */
  | 'key-lifetime'
  /** The body was a stream too long to buffer: it could be sent once only. */
  | 'one-shot-body'
  /** The catalog advertises no key lifetime (no idempotency support): mutations go once, without a key. */
  | 'keys-unsupported';

/** How one call through the client went, for its final answer or its final error. */
export interface CallOutcome {
  /** The `Idempotency-Key` every attempt carried (the caller's own, or a fresh UUIDv7); none for safe methods. */
  readonly key: string | undefined;
  /** Attempts sent, the first one included. */
  readonly attempts: number;
  /** Whether the final answer says it was replayed (`Idempotent-Replayed: true`): an earlier attempt executed. */
  readonly replayed: boolean;
  /** From the start of the first attempt to the final answer or error, in ms. */
  readonly elapsedMs: number;
  /** Set when the last answer or error could have been retried but the client stopped. */
  readonly gaveUp: GaveUp | undefined;
}

// Keyed by the Response (or the error) the caller receives, so it goes when they drop it.
const outcomes = new WeakMap<object, CallOutcome>();

/** Remember the outcome of a call under the answer or error the caller receives. */
export function recordOutcome(result: unknown, outcome: CallOutcome): void {
  if (typeof result === 'object' && result !== null) outcomes.set(result, outcome);
}

/**
 * How the call that produced this `Response` (or rejected with this error) went: its key, attempts, whether
 * the final answer is a replay, and why retrying stopped. `undefined` for anything the client did not return.
 *
 * @example
 * const response = await idempotentFetch(url, { method: 'POST', body });
 * callOutcome(response); // { key: '0190…', attempts: 2, replayed: true, elapsedMs: 130, gaveUp: undefined }
 */
export function callOutcome(result: unknown): CallOutcome | undefined {
  return typeof result === 'object' && result !== null ? outcomes.get(result) : undefined;
}

/**
 * Whether the server says this answer is a replay of an earlier execution (`Idempotent-Replayed: true`):
 * the request had already been carried out, and this is the answer it got then. In a browser, the server
 * must list the header in `Access-Control-Expose-Headers` for a cross-origin page to read it.
 */
export function isReplay(response: Response): boolean {
  return response.headers.get(REPLAYED_HEADER)?.trim().toLowerCase() === 'true';
}
