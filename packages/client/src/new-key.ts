import { v7 } from 'uuid';

/**
 * A fresh `Idempotency-Key`: an RFC 9562 UUIDv7 (time-ordered, 74 random bits), what `createIdempotentFetch`
 * sends when the caller gives none, and what idem's servers accept by default. `uuidgen` makes a v4, which they
 * refuse; on a shell, `npx uuid v7` makes one.
 *
 * @example await fetch(url, { method: 'POST', headers: { 'Idempotency-Key': newIdempotencyKey() }, body })
 */
export function newIdempotencyKey(): string {
  return v7();
}
