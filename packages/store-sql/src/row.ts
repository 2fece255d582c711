import type { IdempotencyRecord, ListedRecord, StoredResponse } from '@idem/core';

/** The column names of the records table, shared by every dialect. */
export const COLUMNS = [
  'scope',
  'idem_key',
  'fingerprint',
  'owner',
  'lease_until_ms',
  'response_status',
  'response_headers',
  'response_body',
  'body_omitted',
  'created_at_ms',
  'updated_at_ms',
  'expires_at_ms',
] as const;

/** A row as a driver returns it: bigints may be strings, blobs Buffers, booleans 0/1. */
export type RawRow = Record<string, unknown>;

function toBytes(value: unknown): Uint8Array | null {
  if (value === null || value === undefined) return null;
  if (value instanceof Uint8Array) {
    // Drivers hand out Buffers; a plain Uint8Array view over the same memory is what the SPI promises.
    return value.constructor === Uint8Array
      ? value
      : new Uint8Array(value.buffer, value.byteOffset, value.byteLength);
  }
  throw new TypeError(`unexpected body value from the driver: ${typeof value}`);
}

/** Turn a driver's row into a record, whatever the driver's representation of each column. */
export function toRecord(row: RawRow): IdempotencyRecord {
  let response: StoredResponse | null = null;
  if (row.response_status !== null && row.response_status !== undefined) {
    const omitted = row.body_omitted === true || row.body_omitted === 1 || row.body_omitted === '1';
    response = {
      status: Number(row.response_status),
      headers: JSON.parse(String(row.response_headers ?? '{}')) as Record<string, string>,
      body: toBytes(row.response_body),
      ...(omitted ? { bodyOmitted: true as const } : {}),
    };
  }
  return {
    scope: String(row.scope),
    key: String(row.idem_key),
    fingerprint: String(row.fingerprint),
    owner: row.owner === null || row.owner === undefined ? null : String(row.owner),
    leaseUntilMs: Number(row.lease_until_ms),
    response,
    createdAtMs: Number(row.created_at_ms),
    expiresAtMs: Number(row.expires_at_ms),
  };
}

/**
 * A row of `list` as a listed record: `body_bytes` holds the body's size; `response_body` was selected only when
 * the bodies were asked for.
 */
export function toListedRecord(row: RawRow, bodies: boolean): ListedRecord {
  const record = toRecord(row);
  const { response } = record;
  if (response === null) return { ...record, response: null };
  const { status, headers, body, bodyOmitted } = response;
  const size = row.body_bytes;
  return {
    ...record,
    response: {
      status,
      headers,
      bodyBytes: size === null || size === undefined ? null : Number(size),
      ...(bodyOmitted === true ? { bodyOmitted } : {}),
      ...(bodies ? { body } : {}),
    },
  };
}

/** A Buffer view of bytes, for drivers that only bind Buffers. */
export function toBuffer(bytes: Uint8Array | null): Buffer | null {
  if (bytes === null) return null;
  return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}
