import type { FinalizeParams, ReserveParams, StoredResponse } from '@idem/core';

/** The longest scope, key, fingerprint or owner the table holds, in characters. */
export const MAX_IDENTIFIER_CHARS = 255;
/** The longest serialized header map, in bytes (MySQL's TEXT). */
export const MAX_HEADERS_BYTES = 65_535;

/** Raised for a value the table cannot hold: the store refuses it instead of letting a database truncate it. */
export class SqlStoreLimitError extends RangeError {
  override name = 'SqlStoreLimitError';
}

function checkIdentifier(field: string, value: string): void {
  if (value.length > MAX_IDENTIFIER_CHARS) {
    throw new SqlStoreLimitError(
      `${field} has ${value.length} characters; the SQL store holds at most ${MAX_IDENTIFIER_CHARS}`,
    );
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
      throw new SqlStoreLimitError(
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
    throw new SqlStoreLimitError(`response status ${response.status} is not an HTTP status code`);
  }
  // Escaped to ASCII so that the column's character set (latin1 on a default MariaDB) cannot mangle a value.
  const headers = JSON.stringify(response.headers).replace(
    /[\u007f-\uffff]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
  if (Buffer.byteLength(headers) > MAX_HEADERS_BYTES) {
    throw new SqlStoreLimitError(
      `response headers take ${Buffer.byteLength(headers)} bytes; at most ${MAX_HEADERS_BYTES}`,
    );
  }
  if (response.body !== null && response.body.byteLength > maxBodyBytes) {
    throw new SqlStoreLimitError(
      `response body has ${response.body.byteLength} bytes; this store holds at most ${maxBodyBytes}`,
    );
  }
  return headers;
}
