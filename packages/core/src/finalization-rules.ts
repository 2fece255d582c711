/** What the coordinator does with a finished response: store it for replay, or free the key for a retry. */
export type FinalizationAction = 'finalize' | 'release';

/** Decides, from the response status, whether a finished request is stored (replayed) or released. */
export type FinalizationRule = (status: number) => FinalizationAction;

// Client errors that repeat identically for the same request: safe, and useful, to replay.
const DETERMINISTIC_CLIENT_ERRORS: ReadonlySet<number> = new Set([
  400, 404, 405, 406, 409, 410, 411, 412, 413, 414, 415, 422,
]);

/**
 * The default rule:
 * - 1xx, 2xx, 3xx and the deterministic 4xx (400, 404, 405, 406, 409, 410, 411, 412, 413, 414, 415, 422):
 *   finalize, so a retry replays.
 * - 401, 403, 407, 408, 419, 425, 429, every other 4xx, and every 5xx: release. These depend on time or
 *   credentials, and a 5xx means "commit state unknown", which must stay retryable.
 */
export const defaultFinalizationRule: FinalizationRule = (status) => {
  if (status >= 100 && status < 400) {
    return 'finalize';
  }
  return DETERMINISTIC_CLIENT_ERRORS.has(status) ? 'finalize' : 'release';
};
