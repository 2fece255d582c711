import type { IdempotencyRecord, RecordRef, ReserveParams, StoredResponse } from '@idem/core';

/*
 * A record is one Redis string (one key, one slot; every byte kept as it is). One string rather than a hash,
 * for speed: a fresh key is a single `SET … NX PXAT … GET`, which also answers a replay in the same round trip
 * with the whole record, and a body over 64 bytes would turn a small hash into a full hash table at every
 * finalize. Its layout, 0-based:
 *
 *   0       state: 'i' in flight, 'c' completed
 *   1-16    leaseUntilMs, 16 decimal digits (every safe integer fits)
 *   17-32   createdAtMs
 *   33-48   expiresAtMs
 *   49-51   status, 3 digits ('000' in flight)
 *   52      bodyOmitted: '1' or '0'
 *   53      body: '1' present, '0' null
 *   54-     fingerprint, owner, headers (JSON): each an 8-digit byte length, then the bytes
 *   then    the body, to the end
 *
 * The script (script.ts) reads the same offsets, 1-based.
 */
export const FIXED_BYTES = 54;
const LENGTH_DIGITS = 8;

/** A time as the record's 16 digits; the limits allow only non-negative safe integers. */
export const digits16 = (ms: number): string => String(ms).padStart(16, '0');

const textField = (text: string): string =>
  `${String(Buffer.byteLength(text, 'utf8')).padStart(LENGTH_DIGITS, '0')}${text}`;

/**
 * The value of a new in-flight record: the caller's parameters. A string, which the client writes as UTF-8
 * (fingerprint and owner are well-formed, the rest ASCII), so that the lengths are counted in those bytes; a
 * command of strings also costs the clients less than one with a Buffer in it.
 */
export function encodeInFlight(params: ReserveParams): string {
  const times = `${digits16(params.leaseUntilMs)}${digits16(params.nowMs)}${digits16(params.expiresAtMs)}`;
  return `i${times}00000${textField(params.fingerprint)}${textField(params.owner)}${textField('')}`;
}

/**
 * What a finalize writes, in three arguments: the status and flags (offsets 49-53); an empty owner and the
 * headers, as text; the body, as bytes (absent when null). The script keeps the times and the fingerprint it
 * finds and appends these, so the body is never copied into one buffer with the rest on this side.
 */
export function encodeCompletion(response: StoredResponse, headers: string): (string | Buffer)[] {
  const { status, body, bodyOmitted } = response;
  const flags = `${status}${bodyOmitted === true ? '1' : '0'}${body === null ? '0' : '1'}`;
  const fields = `${textField('')}${textField(headers)}`;
  if (body === null) return [flags, fields];
  return [
    flags,
    fields,
    Buffer.isBuffer(body) ? body : Buffer.from(body.buffer, body.byteOffset, body.byteLength),
  ];
}

const malformed = (why: string) =>
  new Error(
    `the Redis value of this record is malformed (${why}): is another program writing under this prefix?`,
  );

/**
 * The record from the head of its value (up to the body, as the script's `head` reads it) and the value's whole
 * length: its body is not there (an empty one stands for it when the record has one) and `bodyBytes` is its
 * size, `null` when there is none.
 */
export function decodeRecordHead(
  ref: RecordRef,
  head: Buffer,
  valueBytes: number,
): { record: IdempotencyRecord; bodyBytes: number | null } {
  const record = decodeRecord(ref, head);
  const body = record.response?.body ?? null;
  if (body !== null && body.byteLength !== 0) throw malformed('a head with body bytes');
  return { record, bodyBytes: body === null ? null : valueBytes - head.byteLength };
}

/**
 * The record from its value. Scope and key are the caller's: the Redis key is made from them, so they are not
 * stored again.
 */
export function decodeRecord(ref: RecordRef, value: Buffer): IdempotencyRecord {
  if (value.byteLength < FIXED_BYTES + 3 * LENGTH_DIGITS) throw malformed('too short');
  const state = value[0];
  const int = (from: number, to: number) => {
    const parsed = Number(value.toString('latin1', from, to));
    if (!Number.isSafeInteger(parsed)) throw malformed(`bytes ${from}-${to}`);
    return parsed;
  };
  let at = FIXED_BYTES;
  const next = (): Buffer => {
    const length = int(at, at + LENGTH_DIGITS);
    const bytes = value.subarray(at + LENGTH_DIGITS, at + LENGTH_DIGITS + length);
    at += LENGTH_DIGITS + length;
    return bytes;
  };
  const fingerprint = next().toString('utf8');
  const owner = next().toString('utf8');
  const headers = next();
  let response: StoredResponse | null = null;
  if (state === 0x63 /* c */) {
    response = {
      status: int(49, 52),
      headers: JSON.parse(headers.toString('utf8')) as Record<string, string>,
      // A copy, as a plain Uint8Array: the client's Buffer may be a view of a larger socket buffer.
      body: value[53] === 0x31 ? new Uint8Array(value.subarray(at)) : null,
      ...(value[52] === 0x31 ? { bodyOmitted: true as const } : {}),
    };
  } else if (state !== 0x69 /* i */) {
    throw malformed('unknown state');
  }
  return {
    scope: ref.scope,
    key: ref.key,
    fingerprint,
    owner: response === null ? owner : null,
    leaseUntilMs: int(1, 17),
    response,
    createdAtMs: int(17, 33),
    expiresAtMs: int(33, 49),
  };
}
