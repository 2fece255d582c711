import type { StoredResponse } from './types.js';

/** Response headers stored and replayed by default. */
export const DEFAULT_REPLAY_HEADERS: readonly string[] = [
  'content-type',
  'location',
  'content-location',
  'etag',
  'last-modified',
  'link',
];

/** Headers that are never stored, whatever the allow-list says: they carry secrets or the time of day. */
export const NEVER_STORED_HEADERS: ReadonlySet<string> = new Set([
  'set-cookie',
  'cookie',
  'date',
  'authorization',
  'proxy-authorization',
  'www-authenticate',
  'proxy-authenticate',
]);

/** The default body cap: 1 MiB. */
export const DEFAULT_MAX_BODY_BYTES = 1024 * 1024;

/** Header values as frameworks hold them. */
export type HeaderValue = string | number | readonly string[] | undefined;

/** A response as an adapter captured it, before filtering. */
export interface CapturedResponse {
  readonly status: number;
  /** Response headers; names in any case. */
  readonly headers: Readonly<Record<string, HeaderValue>>;
  /** The bytes written, a string, or nothing. */
  readonly body: Uint8Array | string | null | undefined;
  /**
   * `true` when the adapter stopped buffering because the body grew past the cap, so `body` is incomplete
   * and MUST NOT be stored.
   */
  readonly bodyTruncated?: boolean | undefined;
  /**
   * The `Content-Encoding` of `body` as captured (`gzip` when a compression layer wrote it encoded), or
   * undefined for plain bytes. It is stored with the body whatever the allow-list says, and a
   * `content-encoding` among `headers` is ignored: it may describe bytes written after the capture.
   */
  readonly contentEncoding?: string | undefined;
}

/** A response the coordinator answers with instead of running the handler. */
export interface ReplayResponse {
  readonly status: number;
  /** Lower-case names, including `idempotent-replayed: true`. */
  readonly headers: Readonly<Record<string, string>>;
  readonly body: Uint8Array | null;
}

/** The header that marks every replayed response. */
export const REPLAYED_HEADER = 'idempotent-replayed';
/** The header that marks a replay whose body was too large to store. */
export const BODY_OMITTED_HEADER = 'idempotent-replay-body-omitted';

/**
 * The header that marks a replay whose headers the store could not hold: only the status (and the body, where
 * it fit) was kept. It is stored among the record's headers, so that every store keeps it as it keeps any.
 */
export const HEADERS_OMITTED_HEADER = 'idempotent-replay-headers-omitted';

/** What a store could not hold of a response, and left out so that the rest is kept. */
export type OmittedParts = 'body' | 'headers' | 'body-and-headers';

/**
 * What is kept of a response the store cannot hold whole (a header over its limit, a body over its size):
 * smaller records, from the most kept to the status alone, each with what it left out. The status is always
 * kept: the request ran, and a retry must be told so rather than run it again. A body kept without its
 * headers keeps its `content-encoding`, without which its bytes read as garbage.
 */
export function smallerResponses(
  stored: StoredResponse,
): { readonly response: StoredResponse; readonly omitted: OmittedParts }[] {
  const { status, headers, body } = stored;
  const withoutBody = body !== null || stored.bodyOmitted === true ? { bodyOmitted: true as const } : {};
  const marker = { [HEADERS_OMITTED_HEADER]: 'true' };
  const encoding = headers['content-encoding'];
  const smaller: { response: StoredResponse; omitted: OmittedParts }[] = [];
  if (body !== null) {
    smaller.push({ response: { status, headers, body: null, ...withoutBody }, omitted: 'body' });
  }
  if (Object.keys(headers).length > 0) {
    if (body !== null) {
      const kept = encoding === undefined ? marker : { 'content-encoding': encoding, ...marker };
      smaller.push({ response: { status, headers: kept, body }, omitted: 'headers' });
    }
    smaller.push({
      response: { status, headers: marker, body: null, ...withoutBody },
      omitted: body !== null ? 'body-and-headers' : 'headers',
    });
  }
  return smaller;
}

export interface StoreResponseOptions {
  /** Lower-case header names to keep. */
  readonly allowHeaders: ReadonlySet<string>;
  readonly maxBodyBytes: number;
}

/**
 * Turn a captured response into what a store keeps: allow-listed headers with lower-case names and string
 * values, and the body as bytes, or no body and `bodyOmitted` when it is larger than the cap.
 */
export function toStoredResponse(response: CapturedResponse, options: StoreResponseOptions): StoredResponse {
  const headers: Record<string, string> = {};
  const captured = response.headers;
  for (const name in captured) {
    if (!Object.hasOwn(captured, name)) continue;
    const value = captured[name];
    const lower = name.toLowerCase();
    if (value === undefined || !options.allowHeaders.has(lower) || NEVER_STORED_HEADERS.has(lower)) continue;
    if (lower === 'content-encoding') continue;
    // As Node writes them: an array joined, anything else (a number, even a null) as its text.
    setHeader(headers, lower, Array.isArray(value) ? value.join(', ') : String(value));
  }
  const body = typeof response.body === 'string' ? Buffer.from(response.body) : (response.body ?? null);
  if (response.bodyTruncated === true || (body !== null && body.byteLength > options.maxBodyBytes)) {
    return { status: response.status, headers, body: null, bodyOmitted: true };
  }
  // Encoded bytes are kept with their encoding, or the replay would be garbage to the client.
  if (body !== null && response.contentEncoding !== undefined && response.contentEncoding !== 'identity') {
    headers['content-encoding'] = response.contentEncoding;
  }
  return { status: response.status, headers, body };
}

/**
 * Set `name` on a header map made here: as an own property whatever the name, the way a spread or `JSON.parse`
 * makes one. A name Object.prototype has (`__proto__`, `constructor`) is defined, so that neither a setter nor
 * a frozen prototype swallows it or throws.
 */
function setHeader(headers: Record<string, string>, name: string, value: string): void {
  if (name in headers) {
    Object.defineProperty(headers, name, { value, enumerable: true, writable: true, configurable: true });
  } else {
    headers[name] = value;
  }
}

/**
 * A copy of a header map, to set more names on. Not `{ ...headers, name: value }`: Node 20's V8 spends about a
 * microsecond for every name set on an object made by a spread, and leaves garbage that reaches the old
 * generation (docs/benchmarks.md). The copy is the spread's: own enumerable names in their order (symbols aside).
 */
export function copyHeaders(headers: Readonly<Record<string, string>>): Record<string, string> {
  const copy: Record<string, string> = {};
  if (headers === undefined || headers === null) return copy; // as a spread takes them (a hook's result)
  const names = Object.keys(headers);
  for (let i = 0; i < names.length; i++) {
    const name = names[i] as string;
    setHeader(copy, name, headers[name] as string);
  }
  return copy;
}

/** The answer that replays a stored response. */
export function toReplayResponse(stored: StoredResponse): ReplayResponse {
  const headers = copyHeaders(stored.headers);
  headers[REPLAYED_HEADER] = 'true';
  if (stored.bodyOmitted === true) {
    headers[BODY_OMITTED_HEADER] = 'true';
  }
  return { status: stored.status, headers, body: stored.body };
}
