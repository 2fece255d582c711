import type { IdempotencyRecord, RecordRef, StoredResponse } from '@idem/core';
import type { Reply } from './clients/connection.js';

const text = (value: Reply | undefined): string | null =>
  Buffer.isBuffer(value) ? value.toString('utf8') : value == null ? null : String(value);

const integer = (value: Reply | undefined): number => {
  const parsed = Number(text(value));
  if (!Number.isSafeInteger(parsed)) throw new Error(`the record holds a malformed time: ${text(value)}`);
  return parsed;
};

/**
 * The record from its hash fields (in the order of `FIELDS`), or `undefined` when the key does not exist.
 * Scope and key are the caller's: the Redis key is made from them, so they are not stored again.
 */
export function toRecord(ref: RecordRef, fields: readonly Reply[]): IdempotencyRecord | undefined {
  const [fp, owner, lease, created, expires, status, headers, body, omitted] = fields;
  if (expires == null) return undefined;
  let response: StoredResponse | null = null;
  if (status != null) {
    response = {
      status: integer(status),
      headers: JSON.parse(text(headers) ?? '{}') as Record<string, string>,
      // A copy, as a plain Uint8Array: the client's Buffer may be a view of a larger socket buffer.
      body: Buffer.isBuffer(body) ? new Uint8Array(body) : null,
      ...(text(omitted) === '1' ? { bodyOmitted: true as const } : {}),
    };
  }
  return {
    scope: ref.scope,
    key: ref.key,
    fingerprint: text(fp) ?? '',
    owner: text(owner),
    leaseUntilMs: integer(lease),
    response,
    createdAtMs: integer(created),
    expiresAtMs: integer(expires),
  };
}
