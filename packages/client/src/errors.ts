/** Every stable error code of the client. Match on these, never on class names or messages. */
export const ClientErrorCode = {
  /** The key lifetime could not be read from the catalog's `/v1/config`: no mutation is sent. */
  LifetimeUnknown: 'IDEMPOTENCY_LIFETIME_UNKNOWN',
  /**
   * The caller's key is already past its lifetime (the time inside their UUIDv7 key plus the key lifetime): the
   * server may have forgotten it, so it is never sent. Nothing is sent; call again with a fresh key.
   */
  KeyExpired: 'IDEMPOTENCY_KEY_EXPIRED',
} as const;

export type ClientErrorCode = (typeof ClientErrorCode)[keyof typeof ClientErrorCode];

// A registered symbol survives two copies of this package in one process (ESM + CJS), where instanceof fails.
const CLIENT_ERROR = Symbol.for('@idem/client/error');

/** An error of the client itself, with a stable {@link IdemClientError.code} and the `cause` behind it. */
export class IdemClientError extends Error {
  readonly code: ClientErrorCode;

  constructor(code: ClientErrorCode, message: string, options: { cause?: unknown } = {}) {
    super(message, 'cause' in options ? { cause: options.cause } : undefined);
    this.name = new.target.name;
    this.code = code;
    Object.defineProperty(this, CLIENT_ERROR, { value: true });
  }
}

/** Whether `error` is an {@link IdemClientError}, from this copy of the package or another. */
export function isIdemClientError(error: unknown): error is IdemClientError {
  return typeof error === 'object' && error !== null && CLIENT_ERROR in error;
}
