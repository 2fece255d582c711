/** The outcome of validating one key: the normalized key, or why it was rejected. */
export type KeyValidation =
  | { readonly ok: true; readonly key: string }
  | { readonly ok: false; readonly reason: string };

export interface UuidV7Options {
  /**
   * Reject a UUIDv7 whose embedded timestamp is more than this many ms ahead of `nowMs` (defence in depth
   * against keys minted with a broken clock). Off when undefined.
   */
  readonly maxFutureSkewMs?: number | undefined;
  /** The current time, epoch ms; needed only with `maxFutureSkewMs`. */
  readonly nowMs?: number;
}

const HYPHENS = [8, 13, 18, 23] as const;

function isHexCode(c: number): boolean {
  return (c >= 0x30 && c <= 0x39) || (c >= 0x61 && c <= 0x66) || (c >= 0x41 && c <= 0x46);
}

/**
 * Validate an RFC 9562 UUID version 7 in its hyphenated 8-4-4-4-12 form, case-insensitive, and normalize it
 * to lower case. The structured-field string form (`"…"`, as the IETF idempotency-key draft writes it) is
 * accepted. Nil, max, other versions, other variants, braces, `urn:uuid:` and any whitespace are rejected.
 *
 * @example validateUuidV7('"0190B7E2-5A5D-7C3E-8F00-1234567890AB"') // { ok: true, key: '0190b7e2-…' }
 */
export function validateUuidV7(raw: string, options: UuidV7Options = {}): KeyValidation {
  const value = raw.length === 38 && raw.startsWith('"') && raw.endsWith('"') ? raw.slice(1, -1) : raw;
  // The common case, a key as clients mint it, in one native match; anything else is examined below, which
  // also says what is wrong with it.
  const key = CANONICAL.test(value) ? value : checkedKey(value);
  if (typeof key !== 'string') return key;
  if (options.maxFutureSkewMs !== undefined) {
    const embeddedMs = Number.parseInt(key.slice(0, 8) + key.slice(9, 13), 16);
    const nowMs = options.nowMs ?? Date.now();
    if (embeddedMs > nowMs + options.maxFutureSkewMs) {
      return { ok: false, reason: 'UUIDv7 timestamp is too far in the future' };
    }
  }
  return { ok: true, key };
}

/** A UUIDv7 in lower case with the RFC 9562 variant: already normalized. */
const CANONICAL = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** The normalized key, or why `value` is not a UUIDv7. */
function checkedKey(value: string): string | { readonly ok: false; readonly reason: string } {
  if (value.length !== 36) {
    return { ok: false, reason: `a UUIDv7 has 36 characters, got ${value.length}` };
  }
  for (let i = 0; i < 36; i++) {
    const c = value.charCodeAt(i);
    const hyphen = (HYPHENS as readonly number[]).includes(i);
    if (hyphen ? c !== 0x2d : !isHexCode(c)) {
      return { ok: false, reason: `not a hyphenated 8-4-4-4-12 hex UUID (position ${i + 1})` };
    }
  }
  const key = value.toLowerCase();
  if (key[14] !== '7') {
    return { ok: false, reason: `UUID version ${key[14]} is not 7` };
  }
  // RFC 9562 variant: the two top bits of clock_seq_hi are 10, so the 17th hex digit is 8, 9, a or b.
  if (!'89ab'.includes(key[19] as string)) {
    return { ok: false, reason: 'UUID variant bits are not 10 (RFC 9562)' };
  }
  return key;
}

/** The longest token key accepted by {@link validateToken}. */
export const MAX_TOKEN_LENGTH = 255;

/**
 * Validate a generic (Stripe-like) token key: 1–255 visible ASCII characters (0x21–0x7E), no commas (a comma
 * is how a repeated header arrives once joined). The key is kept as sent.
 */
export function validateToken(raw: string): KeyValidation {
  if (raw.length === 0 || raw.length > MAX_TOKEN_LENGTH) {
    return { ok: false, reason: `a key has 1 to ${MAX_TOKEN_LENGTH} characters, got ${raw.length}` };
  }
  for (let i = 0; i < raw.length; i++) {
    const c = raw.charCodeAt(i);
    if (c < 0x21 || c > 0x7e || c === 0x2c) {
      return {
        ok: false,
        reason: `a key has visible ASCII characters other than commas only (position ${i + 1})`,
      };
    }
  }
  return { ok: true, key: raw };
}
