import type { IdempotencyRecord, RecordRef, ReserveParams, StoredResponse } from '@idem/core';

/*
 * A record is one Redis string (one key, one slot; every byte kept as it is). One string rather than a hash,
 * for speed: a fresh key is a single `SET … NX PXAT … GET`, which also answers a replay in the same round trip
 * with the whole record, and a body over 64 bytes would turn a small hash into a full hash table at every
 * finalize. Its layout, 0-based, lengths in decimal digits of UTF-8 bytes:
 *
 * In flight:                           Completed:
 *   0      'i'                           0      'c'
 *   1-4    owner length (4 digits)       1-     the in-flight value's tail, as it was: times, fingerprint
 *   5-     owner                         then   status (3 digits), bodyOmitted ('1'/'0'), body ('1' present,
 *   then   the tail: leaseUntilMs,                '0' null), headers (JSON) length (8 digits), headers
 *          createdAtMs, expiresAtMs              then   the body, to the end
 *          (16 digits each), fingerprint
 *          length (4 digits), fingerprint
 *
 * The state and the owner come first so that the fenced operations compare the caller's {@link ownerHead}
 * (`i`, length, owner) with the value's first bytes, one string comparison that implies both the state and the
 * owner, and a finalize writes `c`, the tail it finds and the completion the caller sent, without decoding the
 * record (script.ts). An owner or a fingerprint is at most 1,024 UTF-16 units (limits.ts), so at most 3,072
 * bytes: 4 digits hold its length.
 */
const OWNER_AT = 5;
const TIME_DIGITS = 16;
const SHORT_DIGITS = 4;
const HEADERS_DIGITS = 8;
/** The tail's length before the fingerprint: three times and the fingerprint's length. */
const TAIL_FIXED = 3 * TIME_DIGITS + SHORT_DIGITS;
/** The completion's length before the headers: status, two flags, the headers' length. */
const COMPLETION_FIXED = 3 + 2 + HEADERS_DIGITS;

/** A time as the record's 16 digits; the limits allow only non-negative safe integers. */
export const digits16 = (ms: number): string => String(ms).padStart(TIME_DIGITS, '0');

/** `text` after its UTF-8 byte length in `digits` digits. */
const field = (text: string, digits: number): string =>
  `${String(Buffer.byteLength(text, 'utf8')).padStart(digits, '0')}${text}`;

/**
 * What an in-flight record of `owner` starts with: `i`, the owner's length, the owner. A fenced operation holds
 * when the value starts with exactly these bytes (the length makes a prefix of a longer owner no match).
 */
export const ownerHead = (owner: string): string => `i${field(owner, SHORT_DIGITS)}`;

/**
 * The value of a new in-flight record: the caller's parameters. A string, which the client writes as UTF-8
 * (fingerprint and owner are well-formed, the rest ASCII), so that the lengths are counted in those bytes; a
 * command of strings also costs the clients less than one with a Buffer in it.
 */
export const encodeInFlight = (params: ReserveParams): string =>
  `${ownerHead(params.owner)}${digits16(params.leaseUntilMs)}${digits16(params.nowMs)}${digits16(params.expiresAtMs)}${field(params.fingerprint, SHORT_DIGITS)}`;

/**
 * What a finalize appends to the tail of the in-flight record: status, flags and headers as text (`headers` is
 * their JSON and `headerBytes` its UTF-8 length), then the body as bytes (absent when null), a separate argument
 * so that the body is never copied into one buffer with the rest on this side.
 */
export function encodeCompletion(
  response: StoredResponse,
  headers: string,
  headerBytes: number,
): [string] | [string, Buffer] {
  const { status, body, bodyOmitted } = response;
  const text = `${status}${bodyOmitted === true ? '1' : '0'}${body === null ? '0' : '1'}${String(headerBytes).padStart(HEADERS_DIGITS, '0')}${headers}`;
  if (body === null) return [text];
  return [text, Buffer.isBuffer(body) ? body : Buffer.from(body.buffer, body.byteOffset, body.byteLength)];
}

const malformed = (why: string) =>
  new Error(
    `the Redis value of this record is malformed (${why}): is another program writing under this prefix?`,
  );

/** The decimal number in `value[from, to)`: digits only, a safe integer. */
function digitsAt(value: Buffer, from: number, to: number): number {
  if (to > value.length) throw malformed('too short');
  let n = 0;
  for (let at = from; at < to; at++) {
    const digit = (value[at] as number) - 0x30;
    if (digit < 0 || digit > 9) throw malformed(`bytes ${from}-${to}`);
    n = n * 10 + digit;
  }
  if (!Number.isSafeInteger(n)) throw malformed(`bytes ${from}-${to}`);
  return n;
}

/** Where the parts of a value are: the tail, the fingerprint, the completion's headers (completed), its end. */
interface Layout {
  readonly inFlight: boolean;
  /** Where the tail starts (in flight, where the owner ends). */
  readonly tail: number;
  readonly fingerprintEnd: number;
  /** Completed: where the headers start and end (the body follows); in flight, both fingerprintEnd. */
  readonly headers: number;
  readonly headersEnd: number;
}

function layoutOf(value: Buffer): Layout {
  const state = value[0];
  let tail = 1;
  if (state === 0x69 /* i */) tail = OWNER_AT + digitsAt(value, 1, OWNER_AT);
  else if (state !== 0x63 /* c */) throw malformed(value.length === 0 ? 'empty' : 'unknown state');
  const fingerprint = tail + TAIL_FIXED;
  const fingerprintEnd = fingerprint + digitsAt(value, fingerprint - SHORT_DIGITS, fingerprint);
  if (fingerprintEnd > value.length) throw malformed('too short');
  if (state === 0x69) {
    return { inFlight: true, tail, fingerprintEnd, headers: fingerprintEnd, headersEnd: fingerprintEnd };
  }
  const headers = fingerprintEnd + COMPLETION_FIXED;
  const headersEnd = headers + digitsAt(value, headers - HEADERS_DIGITS, headers);
  if (headersEnd > value.length) throw malformed('too short');
  return { inFlight: false, tail, fingerprintEnd, headers, headersEnd };
}

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
  const layout = layoutOf(value);
  const { tail, fingerprintEnd } = layout;
  const fingerprint = value.toString('utf8', tail + TAIL_FIXED, fingerprintEnd);
  let response: StoredResponse | null = null;
  if (!layout.inFlight) {
    const flags = fingerprintEnd + 3;
    const omitted = value[flags];
    const present = value[flags + 1];
    if ((omitted !== 0x30 && omitted !== 0x31) || (present !== 0x30 && present !== 0x31)) {
      throw malformed('flags');
    }
    if (present === 0x30 && layout.headersEnd !== value.length) throw malformed('bytes after a null body');
    response = {
      status: digitsAt(value, fingerprintEnd, flags),
      headers: JSON.parse(value.toString('utf8', layout.headers, layout.headersEnd)) as Record<
        string,
        string
      >,
      // A copy, as a plain Uint8Array: the client's Buffer may be a view of a larger socket buffer.
      body: present === 0x31 ? new Uint8Array(value.subarray(layout.headersEnd)) : null,
      ...(omitted === 0x31 ? { bodyOmitted: true as const } : {}),
    };
  } else if (fingerprintEnd !== value.length) {
    throw malformed('bytes after an in-flight record');
  }
  return {
    scope: ref.scope,
    key: ref.key,
    fingerprint,
    owner: layout.inFlight ? value.toString('utf8', OWNER_AT, tail) : null,
    leaseUntilMs: digitsAt(value, tail, tail + TIME_DIGITS),
    response,
    createdAtMs: digitsAt(value, tail + TIME_DIGITS, tail + 2 * TIME_DIGITS),
    expiresAtMs: digitsAt(value, tail + 2 * TIME_DIGITS, tail + 3 * TIME_DIGITS),
  };
}
