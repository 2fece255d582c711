import {
  type FinalizeParams,
  IdemStoreLimitError,
  type ReserveParams,
  type StoredResponse,
} from '@idem/core';

/** The longest scope, key, fingerprint or owner the store takes, in UTF-16 code units. */
export const MAX_IDENTIFIER_CHARS = 1_024;
/** The largest header map the store takes, in bytes of its JSON. */
export const MAX_HEADERS_BYTES = 65_536;

function checkLength(field: string, value: string): void {
  if (typeof value !== 'string' || value.length > MAX_IDENTIFIER_CHARS) {
    throw new IdemStoreLimitError(
      `${field} has ${value.length} characters; the Redis store holds at most ${MAX_IDENTIFIER_CHARS}`,
    );
  }
}

/**
 * Scope and key only name the record (they are escaped into its Redis key, losslessly, NUL and lone surrogates
 * included), so only their length is bounded.
 */
export function checkRef(ref: { scope: string; key: string; owner?: string }): void {
  checkLength('scope', ref.scope);
  checkLength('key', ref.key);
  if (ref.owner !== undefined) checkStoredText('owner', ref.owner);
}

/**
 * Fingerprint and owner are stored as UTF-8 and read back: a lone surrogate would come back as U+FFFD, a
 * different string, so it is refused. Any other character, NUL included, round-trips.
 */
function checkStoredText(field: string, value: string): void {
  checkLength(field, value);
  if (!value.isWellFormed()) {
    throw new IdemStoreLimitError(`${field} is not well-formed Unicode (a lone surrogate)`);
  }
}

export function checkReserve(params: ReserveParams): void {
  checkRef(params);
  checkStoredText('fingerprint', params.fingerprint);
  for (const field of ['nowMs', 'leaseUntilMs', 'expiresAtMs'] as const) checkTime(field, params[field]);
}

/** Times are kept as 16 digits and handed to Redis as PXAT: non-negative integers only. */
export function checkTime(field: string, ms: number): void {
  if (!Number.isSafeInteger(ms) || ms < 0) {
    throw new IdemStoreLimitError(
      `${field} must be a non-negative integer number of epoch milliseconds, got ${ms}`,
    );
  }
}

/** Check what a finalize stores; return the headers as the JSON the record keeps, and its length in bytes. */
export function checkResponse(
  params: FinalizeParams,
  maxBodyBytes: number,
): { headers: string; headerBytes: number } {
  checkRef(params);
  const response: StoredResponse = params.response;
  if (!Number.isInteger(response.status) || response.status < 100 || response.status > 999) {
    throw new IdemStoreLimitError(`response status ${response.status} is not an HTTP status code`);
  }
  const headers = JSON.stringify(response.headers);
  const headerBytes = Buffer.byteLength(headers, 'utf8');
  if (headerBytes > MAX_HEADERS_BYTES) {
    throw new IdemStoreLimitError(
      `response headers take ${headerBytes} bytes; the Redis store holds at most ${MAX_HEADERS_BYTES}`,
    );
  }
  if (response.body !== null && response.body.byteLength > maxBodyBytes) {
    throw new IdemStoreLimitError(
      `response body has ${response.body.byteLength} bytes; this store holds at most ${maxBodyBytes}`,
    );
  }
  return { headers, headerBytes };
}
