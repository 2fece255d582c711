import {
  type FinalizeParams,
  IdemStoreLimitError,
  type ReserveParams,
  type StoredResponse,
} from '@idem/core';

/** The longest scope, key, fingerprint or owner the table holds, in characters. */
export const MAX_IDENTIFIER_CHARS = 255;
/** The longest serialized header map, in bytes (MySQL's TEXT). */
export const MAX_HEADERS_BYTES = 65_535;

// A value the table cannot hold is refused with core's `IdemStoreLimitError` before any SQL, instead of letting a
// database truncate it, mangle it or fail with an error that reads as an outage.

function checkIdentifier(field: string, value: string): void {
  if (value.length > MAX_IDENTIFIER_CHARS) {
    throw new IdemStoreLimitError(
      `${field} has ${value.length} characters; the SQL store holds at most ${MAX_IDENTIFIER_CHARS}`,
    );
  }
  // PostgreSQL text cannot hold NUL at all; refused on every dialect so that a scope works on all of them.
  if (value.includes('\u0000')) {
    throw new IdemStoreLimitError(`${field} contains a NUL character, which the SQL store cannot hold`);
  }
  // A lone surrogate would be written as U+FFFD by every driver: two different scopes would become one.
  if (!value.isWellFormed()) {
    throw new IdemStoreLimitError(`${field} is not well-formed Unicode (a lone surrogate)`);
  }
}

export function checkRef(ref: { scope: string; key: string; owner?: string }): void {
  checkIdentifier('scope', ref.scope);
  checkIdentifier('key', ref.key);
  if (ref.owner !== undefined) checkIdentifier('owner', ref.owner);
}

export function checkReserve(params: ReserveParams): void {
  checkRef(params);
  checkIdentifier('fingerprint', params.fingerprint);
  for (const field of ['nowMs', 'leaseUntilMs', 'expiresAtMs'] as const) {
    if (!Number.isSafeInteger(params[field])) {
      throw new IdemStoreLimitError(
        `${field} must be an integer number of epoch milliseconds, got ${params[field]}`,
      );
    }
  }
}

/** Validate a response and serialize its headers. */
export function checkResponse(params: FinalizeParams, maxBodyBytes: number): string {
  checkRef(params);
  const response: StoredResponse = params.response;
  if (!Number.isInteger(response.status) || response.status < 100 || response.status > 999) {
    throw new IdemStoreLimitError(`response status ${response.status} is not an HTTP status code`);
  }
  // Escaped to ASCII so that the column's character set (latin1 on a default MariaDB) cannot mangle a value.
  const headers = JSON.stringify(response.headers).replace(
    /[\u007f-\uffff]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
  if (Buffer.byteLength(headers) > MAX_HEADERS_BYTES) {
    throw new IdemStoreLimitError(
      `response headers take ${Buffer.byteLength(headers)} bytes; at most ${MAX_HEADERS_BYTES}`,
    );
  }
  if (response.body !== null && response.body.byteLength > maxBodyBytes) {
    throw new IdemStoreLimitError(
      `response body has ${response.body.byteLength} bytes; this store holds at most ${maxBodyBytes}`,
    );
  }
  return headers;
}
