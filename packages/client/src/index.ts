export { type CallOutcome, callOutcome, type GaveUp, isReplay, REPLAYED_HEADER } from './call-outcome.js';
export { createIdempotentFetch, type IdempotentFetch } from './create-idempotent-fetch.js';
export { ClientErrorCode, IdemClientError, isIdemClientError } from './errors.js';
export { parseIsoDurationMs } from './iso-duration.js';
export { newIdempotencyKey } from './new-key.js';
export {
  type Clock,
  DEFAULT_METHODS,
  DEFAULT_RETRY_ON,
  type FetchFunction,
  type IdempotentFetchOptions,
  type RetryEvent,
  type RetryReason,
} from './options.js';
export { parseRetryAfterMs } from './retry-after.js';
export { IN_PROGRESS_CODE } from './retryable-answer.js';
