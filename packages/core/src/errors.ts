/** Every stable error code idem produces. Hosts match on these, never on class names or messages. */
export const ErrorCode = {
  KeyMissing: 'IDEMPOTENCY_KEY_MISSING',
  KeyInvalid: 'IDEMPOTENCY_KEY_INVALID',
  KeyReused: 'IDEMPOTENCY_KEY_REUSED',
  InProgress: 'IDEMPOTENCY_IN_PROGRESS',
  StoreUnavailable: 'IDEMPOTENCY_STORE_UNAVAILABLE',
  StoreLimit: 'IDEMPOTENCY_STORE_LIMIT',
  BodyUnseen: 'IDEMPOTENCY_BODY_UNSEEN',
} as const;

export type ErrorCode = (typeof ErrorCode)[keyof typeof ErrorCode];

// A registered symbol survives two copies of this package in one process (ESM + CJS, or two versions),
// where `instanceof` would not.
const IDEM_ERROR = Symbol.for('@idem/core/error');

export interface IdemErrorOptions {
  cause?: unknown;
  /** The HTTP status the coordinator answers with. */
  status?: number;
  /** Seconds for the `Retry-After` header of the answer, when retrying later can succeed. */
  retryAfterSeconds?: number;
}

/**
 * The base class of every error idem produces, with a stable {@link IdemError.code}.
 *
 * The coordinator returns these (it does not throw them) as its own answers; `status` and
 * `retryAfterSeconds` say how to answer over HTTP. Each subclass fixes its code.
 */
export class IdemError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly retryAfterSeconds: number | undefined;

  constructor(code: ErrorCode, message: string, options: IdemErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.code = code;
    this.status = options.status ?? 500;
    this.retryAfterSeconds = options.retryAfterSeconds;
    Object.defineProperty(this, IDEM_ERROR, { value: true });
  }

  /** Response headers the answer needs (`retry-after`), lower-case names. */
  get headers(): Record<string, string> {
    return this.retryAfterSeconds === undefined ? {} : { 'retry-after': String(this.retryAfterSeconds) };
  }

  /** The default JSON body: `{ "error": { "code", "message" } }`. */
  toJSON(): { error: { code: ErrorCode; message: string } } {
    return { error: { code: this.code, message: this.message } };
  }
}

/** The `Idempotency-Key` header is missing where required, or malformed, or sent more than once. */
export class IdemKeyError extends IdemError {}

/** No `Idempotency-Key` on a covered request while keys are required (`IDEMPOTENCY_KEY_MISSING`). */
export class IdemKeyMissingError extends IdemKeyError {
  constructor(message: string, options: IdemErrorOptions = {}) {
    super(ErrorCode.KeyMissing, message, { status: 400, ...options });
  }
}

/** A malformed or repeated `Idempotency-Key` (`IDEMPOTENCY_KEY_INVALID`); the store was not touched. */
export class IdemKeyInvalidError extends IdemKeyError {
  constructor(message: string, options: IdemErrorOptions = {}) {
    super(ErrorCode.KeyInvalid, message, { status: 400, ...options });
  }
}

/** The key was already used for a request with another fingerprint (`IDEMPOTENCY_KEY_REUSED`). */
export class IdemKeyReusedError extends IdemError {
  constructor(message: string, options: IdemErrorOptions = {}) {
    super(ErrorCode.KeyReused, message, { status: 422, ...options });
  }
}

/** Another request with the same key is still being processed (`IDEMPOTENCY_IN_PROGRESS`). */
export class IdemInProgressError extends IdemError {
  constructor(message: string, options: IdemErrorOptions = {}) {
    super(ErrorCode.InProgress, message, { status: 409, ...options });
  }
}

/** The store failed or did not answer in time; the request was not executed (`IDEMPOTENCY_STORE_UNAVAILABLE`). */
export class IdemStoreUnavailableError extends IdemError {
  constructor(message: string, options: IdemErrorOptions = {}) {
    super(ErrorCode.StoreUnavailable, message, { status: 503, ...options });
  }
}

/**
 * A value the store cannot hold: a scope or key too long for its columns, a character its database refuses
 * (NUL in PostgreSQL text), a response over its size limits (`IDEMPOTENCY_STORE_LIMIT`). Not a fault:
 * retrying cannot help, so the coordinator answers it with a non-retryable 4xx, never a 503, and at finalize
 * it keeps what fits (the status always) instead. Stores throw it before they reach their backend, so that
 * the same call with a smaller value can still succeed, in the same transaction too.
 *
 * @example
 * if (scope.length > 255) throw new IdemStoreLimitError(`scope has ${scope.length} characters; at most 255`);
 */
export class IdemStoreLimitError extends IdemError {
  constructor(message: string, options: Omit<IdemErrorOptions, 'retryAfterSeconds'> = {}) {
    super(ErrorCode.StoreLimit, message, { status: 400, ...options });
  }
}

/**
 * A keyed request with a body that no body parser read, so that it cannot be told from another request under
 * the same key (`IDEMPOTENCY_BODY_UNSEEN`, 415 by default): most often JSON sent without a content type, or
 * as `text/plain`, to an app that parses only `application/json`. Nothing was reserved; the client can send
 * the body with a type the server reads.
 */
export class IdemBodyUnseenError extends IdemError {
  constructor(message: string, options: Omit<IdemErrorOptions, 'retryAfterSeconds'> = {}) {
    super(ErrorCode.BodyUnseen, message, { status: 415, ...options });
  }
}

/** `true` for any {@link IdemError}, including one from another copy of this package. */
export function isIdemError(value: unknown): value is IdemError {
  return (
    typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[IDEM_ERROR] === true
  );
}

/** `true` for an {@link IdemStoreLimitError}, including one from another copy of this package. */
export function isStoreLimitError(value: unknown): value is IdemStoreLimitError {
  return isIdemError(value) && value.code === ErrorCode.StoreLimit;
}
