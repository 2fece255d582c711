import { type KeyValidation, validateToken, validateUuidV7 } from './uuidv7.js';

/** A custom key validator: returns the normalized key or a reason for rejection. */
export type KeyValidator = (raw: string, context: { readonly nowMs: number }) => KeyValidation;

/**
 * How `Idempotency-Key` values are validated: `'uuidv7'` (default, RFC 9562, as Iceberg requires),
 * `'token'` (1–255 visible ASCII, no commas), or a custom validator.
 */
export type KeyFormat = 'uuidv7' | 'token' | KeyValidator;

/**
 * Read the raw header value(s) and validate them. A header sent twice (an array of two, or two values joined
 * by a comma) is rejected, as is any value the format does not accept.
 */
export function parseIdempotencyKey(
  header: string | readonly string[],
  format: KeyFormat,
  context: { readonly nowMs: number; readonly maxFutureSkewMs?: number | undefined },
): KeyValidation {
  if (typeof header !== 'string') {
    if (header.length !== 1) {
      return { ok: false, reason: 'the Idempotency-Key header must be sent exactly once' };
    }
    return parseIdempotencyKey(header[0] as string, format, context);
  }
  if (header.includes(',')) {
    return { ok: false, reason: 'the Idempotency-Key header must hold a single value' };
  }
  if (format === 'uuidv7') {
    return validateUuidV7(header, context);
  }
  if (format === 'token') {
    return validateToken(header);
  }
  return format(header, { nowMs: context.nowMs });
}
