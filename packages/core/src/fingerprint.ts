import { isUtf8 } from 'node:buffer';
import crypto, { createHash } from 'node:crypto';
import { types } from 'node:util';
import { exactCanonicalJson } from './exact-json.js';
import { exactCanonicalJsonBytes, NEEDS_TEXT, NOT_JSON } from './exact-json-bytes.js';

/** Query parameters as a framework hands them over: raw string, `URLSearchParams`, or a parsed object. */
export type QueryInput = string | URLSearchParams | Readonly<Record<string, unknown>>;

/**
 * A body the adapter knows is there but could not read (a handler that streams the request itself, no body
 * parser, no raw bytes kept). It cannot be fingerprinted: {@link computeFingerprint} throws rather than
 * hash it as "no body", which would let two different uploads replay each other.
 */
export const UNSEEN_BODY: unique symbol = Symbol.for('@idem/core/unseen-body');

/** The request identity that a key is bound to. */
export interface FingerprintInput {
  /** HTTP method; case-insensitive. */
  readonly method: string;
  /** The route template (`/v1/namespaces/:namespace`), or the path when there is no router. */
  readonly route: string;
  /**
   * The resolved path as the client sent it, without the query (`/v1/namespaces/sales`). Two requests to one
   * route template with different path parameters are different requests. Adapters always pass it.
   */
  readonly path?: string | undefined;
  /**
   * The query: best the raw query string as sent (`a=1&b=2`, hashed as its raw name/value pairs in the order
   * sent, so that no two different query strings collide), else `URLSearchParams` or a parsed object.
   */
  readonly query?: QueryInput | undefined;
  /**
   * The request body: best the raw bytes or text as received, else a parsed JSON value (object, array,
   * primitive). Raw bytes whose `contentType` is JSON are canonicalized so that key order and whitespace do
   * not matter, keeping every number's exact text; a parsed value has already lost that text (`1e400`,
   * integers beyond 2^53), so adapters pass raw bytes where they can. `begin` also takes a `Blob` (hashed as
   * its bytes) and a `FormData` (hashed as its entries in order, files by name, type and bytes), which it
   * reads first.
   */
  readonly body?: unknown;
  /**
   * The request's `Content-Type`: its media type is part of the identity (`a=1` as a form and as text are two
   * requests), and it says which raw bodies are JSON.
   */
  readonly contentType?: string | undefined;
}

export interface FingerprintOptions {
  /**
   * JSON body fields left out of the fingerprint, as dotted paths from the root (`'meta.requestId'`).
   * Array elements share their array's path, so `'items.traceId'` drops `traceId` from every item.
   */
  readonly excludeFields?: readonly string[] | undefined;
}

const JSON_CONTENT_TYPE = /^application\/(?:[\w.+-]+\+)?json\b/i;

/**
 * The media type as part of the identity: `type/subtype` lower-cased, then its parameters (names lower-cased,
 * quoted values unquoted, `charset` values lower-cased, sorted by name), so that the same bytes under two
 * `multipart/form-data` boundaries or two charsets, which mean different things, are different requests,
 * while two spellings of one type are one. A JSON type's `charset` is left out: JSON is UTF-8 whatever it
 * says.
 */
function mediaTypeOf(contentType: string | undefined): string | null {
  if (contentType === undefined) return null;
  const end = contentType.indexOf(';');
  if (end === -1) return contentType.trim().toLowerCase();
  const type = contentType.slice(0, end).trim().toLowerCase();
  let parameters = mediaTypeParameters(contentType.slice(end + 1));
  // JSON has no charset parameter: it is UTF-8, and one added "has no effect on compliant recipients" (RFC
  // 8259 §11), so it does not make another request.
  if (JSON_CONTENT_TYPE.test(type)) parameters = parameters.filter((p) => !p.startsWith('charset='));
  return parameters.length === 0 ? type : `${type};${parameters.join(';')}`;
}

/** `name=value` pairs of a media type's parameters (RFC 9110 §5.6.6), normalized and sorted by name. */
function mediaTypeParameters(text: string): string[] {
  // [name, normalized parameter]: sorted by name alone, so that one name given twice keeps its order (which of
  // two boundaries a parser takes depends on it).
  const parameters: [name: string, parameter: string][] = [];
  let at = 0;
  while (at < text.length) {
    const equals = text.indexOf('=', at);
    const semicolon = text.indexOf(';', at);
    if (equals === -1 || (semicolon !== -1 && semicolon < equals)) {
      // A parameter without a value: kept as written, so that it still tells two types apart.
      const bare = text
        .slice(at, semicolon === -1 ? text.length : semicolon)
        .trim()
        .toLowerCase();
      if (bare !== '') parameters.push([bare, bare]);
      at = semicolon === -1 ? text.length : semicolon + 1;
      continue;
    }
    const name = text.slice(at, equals).trim().toLowerCase();
    let value: string;
    let next: number;
    let rest = equals + 1;
    while (text[rest] === ' ' || text[rest] === '\t') rest++;
    if (text[rest] === '"') {
      // A quoted string: backslash escapes a character, the closing quote ends it.
      value = '';
      let i = rest + 1;
      for (; i < text.length && text[i] !== '"'; i++) {
        if (text[i] === '\\' && i + 1 < text.length) i++;
        value += text[i];
      }
      const after = text.indexOf(';', i);
      next = after === -1 ? text.length : after + 1;
    } else {
      const after = text.indexOf(';', rest);
      value = text.slice(rest, after === -1 ? text.length : after).trim();
      next = after === -1 ? text.length : after + 1;
    }
    if (name === 'charset') value = value.toLowerCase();
    parameters.push([name, `${name}=${JSON.stringify(value)}`]);
    at = next;
  }
  return parameters.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, parameter]) => parameter);
}

/**
 * SHA-256 (hex) over method, route, path, query, media type and body. Equal fingerprints mean equal requests:
 * the raw query is hashed as its name/value pairs in the order sent (no sorting: `a=1&%61=2` and `%61=2&a=1`
 * are different requests to a server that decodes names), a raw JSON body as canonical JSON (object keys
 * sorted, insignificant whitespace dropped, numbers and strings exactly as they denote, `__proto__` an
 * ordinary key), any other body as its bytes. Linear in the body size (plus key sorting).
 *
 * @throws TypeError for a body marked {@link UNSEEN_BODY}.
 */
export function computeFingerprint(input: FingerprintInput, options: FingerprintOptions = {}): string {
  const body = input.body;
  if (body === UNSEEN_BODY) {
    throw new TypeError(
      'the request has a body the fingerprint cannot see (nothing parsed it and no raw bytes were kept): ' +
        'read it with a body parser that keeps the raw bytes, or give the coordinator a `fingerprint` function',
    );
  }
  const { method, route, path, query, contentType } = input;
  // Plain strings (what the adapters pass) let a raw JSON body's head be written straight into the bytes the
  // hash reads, without building its text: nothing in them can run code or throw. Anything else (a parsed
  // query, whose members may have a `toJSON`) builds the head text now, before the body is looked at.
  const plain =
    typeof method === 'string' &&
    typeof route === 'string' &&
    (path === undefined || path === null || typeof path === 'string') &&
    (query === undefined || typeof query === 'string') &&
    (contentType === undefined || typeof contentType === 'string');
  const built = plain ? undefined : headText(method, route, path, query, contentType);
  const excluded = options.excludeFields?.length ? new Set(options.excludeFields) : undefined;
  if (body === undefined || body === null) {
    return sha256Hex(`${built ?? headText(method, route, path, query, contentType)}\nnone`);
  }
  const raw = typeof body === 'string' || body instanceof Uint8Array ? body : bytesOfBinary(body);
  if (raw === undefined) {
    refuseUnhashable(body, '');
    return parsedFingerprint(built ?? headText(method, route, path, query, contentType), body, excluded);
  }
  if (raw.length === 0) {
    // A view of a buffer transferred away reads as empty: its bytes are gone, not absent.
    if (typeof raw !== 'string') refuseDetached(raw.buffer);
    return sha256Hex(`${built ?? headText(method, route, path, query, contentType)}\nnone`);
  }
  if (contentType !== undefined && isJsonType(contentType)) {
    const fast = rawJsonFingerprint(raw, excluded, built, method, route, path, query, contentType);
    if (typeof fast === 'string') return fast;
    const head = built ?? headText(method, route, path, query, contentType);
    if (fast === NEEDS_TEXT) {
      // A member name with an escape: the string reader, which the byte one is checked against.
      const text = jsonText(raw);
      const canonical = text === undefined ? undefined : exactCanonicalJson(text, excluded);
      if (canonical !== undefined) return sha256Hex(`${head}\njson\n${canonical}`);
    }
    // Not JSON after all (or not UTF-8, or nested too deeply to canonicalize): the raw bytes are the identity.
    return rawBytesFingerprint(head, raw);
  }
  return rawBytesFingerprint(built ?? headText(method, route, path, query, contentType), raw);
}

/**
 * A `FormData` as the parsed value that stands for it in the fingerprint (hashed as canonical JSON, as any
 * parsed body): its entries in the order given, a string as `[name, value]` and a file as `[name, file name,
 * media type, SHA-256 of its bytes]` (not its `lastModified`, which a parser sets to the time it parsed). For a
 * host that has only the parsed form left, its bytes gone: the same form gives the same value, two forms that
 * differ in a name, a value, a file or the order of their entries give two. The encoding the client chose is
 * gone with the bytes (`+` or `%20`, the multipart boundary, which the coordinator drops from the media type as
 * well): forms that parse alike are one request.
 */
export async function formDataValue(form: FormData): Promise<unknown[]> {
  const entries: unknown[] = [];
  for (const [name, value] of form) {
    if (typeof value === 'string') {
      entries.push([name, value]);
    } else {
      const bytes = new Uint8Array(await value.arrayBuffer());
      entries.push([name, value.name, value.type, createHash('sha256').update(bytes).digest('hex')]);
    }
  }
  return entries;
}

/** The head's text: what the body's canonical form or bytes follow in the hashed text. */
function headText(
  method: string,
  route: string,
  path: string | null | undefined,
  query: QueryInput | undefined,
  contentType: string | undefined,
): string {
  return JSON.stringify([
    'idem-fp-v2',
    method.toUpperCase(),
    route,
    path ?? null,
    queryPairs(query),
    mediaTypeOf(contentType),
  ]);
}

/** A body hashed as its bytes (or, for a string that is not well-formed UTF-16, its code units). */
function rawBytesFingerprint(head: string, bytes: Uint8Array | string): string {
  const hash = createHash('sha256');
  hash.update(head);
  // A string that is not well-formed UTF-16 would be encoded to UTF-8 with replacement characters, and two
  // such strings could read alike: those are hashed as their UTF-16 code units instead.
  const wellFormed = typeof bytes !== 'string' || bytes.isWellFormed();
  hash.update(wellFormed ? '\nbytes\n' : '\nutf16\n');
  hash.update(wellFormed ? bytes : Buffer.from(bytes as string, 'utf16le'));
  return hash.digest('hex');
}

/** A parsed body (already checked hashable), hashed as its canonical JSON. */
function parsedFingerprint(head: string, value: unknown, excluded: ReadonlySet<string> | undefined): string {
  const fast = excluded === undefined ? nativeCanonicalJson(value) : undefined;
  if (fast !== undefined) return sha256Hex(`${head}\njson\n${fast}`);
  // A parsed value the engine's serializer cannot write canonically, or with fields to leave out: written in
  // chunks, hashed as it goes.
  const hash = createHash('sha256');
  hash.update(head);
  hash.update('\njson\n');
  writeCanonicalJson(value, excluded, (chunk) => hash.update(chunk));
  return hash.digest('hex');
}

/** SHA-256 of a string's UTF-8, in hex: one call where Node has `crypto.hash` (20.12 and later). */
const sha256Hex: (text: string) => string =
  typeof crypto.hash === 'function'
    ? (text) => crypto.hash('sha256', text, 'hex')
    : (text) => createHash('sha256').update(text).digest('hex');

/** SHA-256 of `bytes[0, length)`, in hex. */
const sha256HexOfBytes: (bytes: Uint8Array, length: number) => string =
  typeof crypto.hash === 'function'
    ? (bytes, length) => crypto.hash('sha256', new Uint8Array(bytes.buffer, bytes.byteOffset, length), 'hex')
    : (bytes, length) =>
        createHash('sha256')
          .update(new Uint8Array(bytes.buffer, bytes.byteOffset, length))
          .digest('hex');

// The last content type seen (most services see one or two), whether it is JSON, and its media type as the
// head writes it.
let lastContentType: string | undefined;
let lastIsJson = false;
let lastMediaJson: Uint8Array = new Uint8Array(0);

function isJsonType(contentType: string): boolean {
  if (typeof contentType !== 'string') return JSON_CONTENT_TYPE.test(contentType);
  if (contentType !== lastContentType) {
    lastIsJson = JSON_CONTENT_TYPE.test(contentType);
    lastMediaJson = Buffer.from(JSON.stringify(mediaTypeOf(contentType)));
    lastContentType = contentType;
  }
  return lastIsJson;
}

/**
 * Scratch buffers for one fingerprint at a time: the canonical bytes with their head, and a string body's
 * UTF-8. Filled and hashed with no code of anyone else's running in between (the fingerprint is synchronous),
 * so one of each serves every call; one grown past {@link KEEP_BYTES} is dropped after its call.
 */
let outScratch = Buffer.allocUnsafeSlow(4_096);
let textScratch = Buffer.allocUnsafeSlow(4_096);
const KEEP_BYTES = 1 << 20;

function outBuffer(size: number): Buffer {
  if (size <= outScratch.length) return outScratch;
  const buffer = Buffer.allocUnsafeSlow(Math.max(size, 2 * outScratch.length));
  if (buffer.length <= KEEP_BYTES) outScratch = buffer;
  return buffer;
}

function textBuffer(size: number): Buffer {
  if (size <= textScratch.length) return textScratch;
  const buffer = Buffer.allocUnsafeSlow(Math.max(size, 2 * textScratch.length));
  if (buffer.length <= KEEP_BYTES) textScratch = buffer;
  return buffer;
}

const HEAD_START = Buffer.from('["idem-fp-v2",');
const JSON_TAG = Buffer.from('\njson\n');
const NULL_TEXT = Buffer.from('null');

/**
 * A string made only of printable ASCII other than `"` and `\` as `JSON.stringify` writes it (upper-cased
 * when `upper`, as `toUpperCase` does to ASCII), into `out` at `at`; -1 for any other string.
 */
function writePlainString(out: Uint8Array, at: number, text: string, upper: boolean): number {
  let o = at;
  out[o++] = 0x22;
  for (let k = 0; k < text.length; k++) {
    let c = text.charCodeAt(k);
    if (c < 0x20 || c === 0x22 || c === 0x5c || c > 0x7f) return -1;
    if (upper && c >= 0x61 && c <= 0x7a) c -= 0x20;
    out[o++] = c;
  }
  out[o++] = 0x22;
  return o;
}

/**
 * The head's text as bytes, written straight from plain ASCII parts (no query, or a raw one); -1 when a part
 * needs escaping or case mapping beyond ASCII (then its text is built).
 */
function writeHead(
  out: Buffer,
  method: string,
  route: string,
  path: string | null | undefined,
  query: string | undefined,
): number {
  out.set(HEAD_START, 0);
  let at = writePlainString(out, HEAD_START.length, method, true);
  if (at < 0) return -1;
  out[at++] = 0x2c;
  at = writePlainString(out, at, route, false);
  if (at < 0) return -1;
  out[at++] = 0x2c;
  if (path === undefined || path === null) {
    out.set(NULL_TEXT, at);
    at += NULL_TEXT.length;
  } else {
    at = writePlainString(out, at, path, false);
    if (at < 0) return -1;
  }
  out[at++] = 0x2c;
  if (query === undefined) {
    out[at++] = 0x5b;
    out[at++] = 0x5d;
  } else {
    at += out.write(JSON.stringify(queryPairs(query)), at, 'utf8');
  }
  out[at++] = 0x2c;
  out.set(lastMediaJson, at);
  at += lastMediaJson.length;
  out[at++] = 0x5d;
  return at;
}

/**
 * The fingerprint of a raw JSON body from its bytes: the head, `\njson\n` and the body's canonical form
 * written into one buffer and hashed in one call, the very bytes the text path hashes. {@link NOT_JSON} or
 * {@link NEEDS_TEXT} when it does not apply.
 */
function rawJsonFingerprint(
  raw: string | Uint8Array,
  excluded: ReadonlySet<string> | undefined,
  built: string | undefined,
  method: string,
  route: string,
  path: string | null | undefined,
  query: QueryInput | undefined,
  contentType: string,
): string | number {
  let src: Uint8Array;
  let end: number;
  if (typeof raw === 'string') {
    // Not well-formed, it has no exact UTF-8: hashed as its code units.
    if (!raw.isWellFormed()) return NOT_JSON;
    src = textBuffer(3 * raw.length);
    end = (src as Buffer).write(raw, 0, 'utf8');
  } else {
    src = raw;
    end = raw.length;
  }
  let out: Buffer | undefined;
  let at = -1;
  if (built === undefined && contentType === lastContentType) {
    // Plain: the query is a string or absent.
    const queryText = query as string | undefined;
    const parts = method.length + route.length + (path?.length ?? 0) + (queryText?.length ?? 0);
    out = outBuffer(3 * parts + lastMediaJson.length + 32 + JSON_TAG.length + end);
    at = writeHead(out, method, route, path, queryText);
  }
  if (out === undefined || at < 0) {
    const head = built ?? headText(method, route, path, query, contentType);
    out = outBuffer(3 * head.length + JSON_TAG.length + end);
    at = out.write(head, 0, 'utf8');
  }
  out.set(JSON_TAG, at);
  const length = exactCanonicalJsonBytes(src, end, out, at + JSON_TAG.length, excluded);
  return length < 0 ? length : sha256HexOfBytes(out, length);
}

/**
 * The bytes of a binary body other than a `Uint8Array`: any typed array or `DataView` (by the bytes it views,
 * not its elements) and an `ArrayBuffer` or `SharedArrayBuffer`. Undefined for anything else.
 */
function bytesOfBinary(body: unknown): Uint8Array | undefined {
  // `util.types` rather than `instanceof`: a buffer made in another realm (a `vm` context) is one too.
  if (ArrayBuffer.isView(body)) {
    refuseDetached(body.buffer);
    return new Uint8Array(body.buffer, body.byteOffset, body.byteLength);
  }
  if (types.isAnyArrayBuffer(body)) {
    refuseDetached(body);
    return new Uint8Array(body);
  }
  return undefined;
}

/**
 * A detached `ArrayBuffer` (transferred to a worker, or by `structuredClone(…, { transfer })`) has no bytes
 * left to hash: refused, rather than hashed as no body.
 */
function refuseDetached(buffer: ArrayBufferLike): void {
  if (buffer.byteLength !== 0) return;
  try {
    new Uint8Array(buffer);
  } catch {
    throw new TypeError(
      'the request body is a detached ArrayBuffer (its bytes were transferred away), which cannot be hashed',
    );
  }
}

/**
 * A parsed body is hashed as canonical JSON, which holds plain objects, arrays and scalars (and whatever a
 * `toJSON` turns into those). Anything else would be written as something it is not (`JSON.stringify` writes
 * a `Map`, a `Blob`, a stream or a `FormData` as `{}`, so two different uploads would share a fingerprint, and
 * a `Uint16Array` as an object of its elements): refused, naming what to pass instead.
 */
function refuseUnhashable(value: unknown, path: string): void {
  if (typeof value !== 'object' || value === null) {
    if (typeof value === 'function' || typeof value === 'symbol') {
      throw new TypeError(`the request body${at(path)} is a ${typeof value}, which has no JSON form to hash`);
    }
    return;
  }
  if (Array.isArray(value) || typeof (value as { toJSON?: unknown }).toJSON === 'function') return;
  const prototype = Object.getPrototypeOf(value);
  if ((prototype === Object.prototype || prototype === null) && !(Symbol.asyncIterator in value)) return;
  const kind = (prototype as { constructor?: { name?: unknown } }).constructor?.name;
  const what = typeof kind === 'string' && kind !== '' ? kind : 'object';
  if (ArrayBuffer.isView(value) || bytesOfBinary(value) !== undefined) {
    throw new TypeError(
      `the request body${at(path)} is a ${what} inside a parsed value: pass binary data as the whole body`,
    );
  }
  if (
    (typeof Blob !== 'undefined' && value instanceof Blob) ||
    (typeof FormData !== 'undefined' && value instanceof FormData) ||
    // `util.types` rather than `instanceof`: a Map made in another realm (a `vm` context) is one too.
    types.isMap(value) ||
    types.isSet(value) ||
    types.isWeakMap(value) ||
    types.isWeakSet(value) ||
    types.isPromise(value) ||
    types.isBoxedPrimitive(value) ||
    typeof (value as { then?: unknown }).then === 'function' ||
    typeof (value as { getReader?: unknown }).getReader === 'function' ||
    typeof (value as { pipe?: unknown }).pipe === 'function' ||
    Symbol.asyncIterator in value ||
    // Any other iterable with no members of its own (URLSearchParams, Headers, a generator): JSON writes `{}`.
    (Symbol.iterator in value && Object.keys(value).length === 0)
  ) {
    throw new TypeError(
      `the request body${at(path)} is a ${what}, which cannot be hashed exactly: pass its bytes ` +
        '(await request.arrayBuffer(), or a raw body parser) or the parsed JSON value',
    );
  }
  // Any other class instance (a DTO a validation pipe built) is written by its own enumerable members, as
  // JSON.stringify writes it.
}

const at = (path: string): string => (path === '' ? '' : ` at ${path}`);

/**
 * The text of a raw JSON body, or undefined when the bytes are not well-formed UTF-8: decoding would replace
 * bad sequences with U+FFFD, and two different bodies would read the same.
 */
function jsonText(body: string | Uint8Array): string | undefined {
  if (typeof body === 'string') return body.isWellFormed() ? body : undefined;
  return isUtf8(body)
    ? Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString('utf8')
    : undefined;
}

type QueryPair =
  | readonly [name: string, value: string | null]
  | readonly [name: string, json: string, 'json'];

/**
 * The query as name/value pairs, in the order given. A raw string is split as sent, without decoding, so that
 * no two different query strings give the same pairs. Not sorted: a server decodes names (`a` and `%61`, `+`
 * and `%20`) and merges them (`qs` reads `a[]=1&a=2` as `a: ['1', '2']`), so no order of raw pairs is safe to
 * call equal but the one sent. Values of a parsed object that are not strings (`qs` turns `a[b]=1` into
 * `{ a: { b: '1' } }`) are tagged, so they never read as a string that looks alike.
 */
function queryPairs(query: QueryInput | undefined): QueryPair[] {
  if (query === undefined) {
    return [];
  }
  const pairs: QueryPair[] = [];
  if (typeof query === 'string') {
    for (const part of (query.startsWith('?') ? query.slice(1) : query).split('&')) {
      if (part === '') continue;
      const at = part.indexOf('=');
      pairs.push(at === -1 ? [part, null] : [part.slice(0, at), part.slice(at + 1)]);
    }
  } else if (query instanceof URLSearchParams) {
    for (const [name, value] of query) pairs.push([name, value]);
  } else {
    for (const [name, value] of Object.entries(query)) {
      for (const item of Array.isArray(value) ? value : [value]) {
        if (item === undefined) continue;
        pairs.push(typeof item === 'string' ? [name, item] : [name, canonicalJson(item), 'json']);
      }
    }
  }
  return pairs;
}

/**
 * Canonical JSON of a parsed value: object keys sorted by code unit, no whitespace, `undefined` members
 * dropped, numbers as `JSON.stringify` writes them except that non-finite numbers (`1e400` parses to
 * Infinity) are written as the bare words `Infinity`, `-Infinity` and `NaN`, which no JSON value reads as.
 * `excluded` holds dotted paths of object members to leave out.
 */
export function canonicalJson(value: unknown, excluded?: ReadonlySet<string>): string {
  let text = '';
  writeCanonicalJson(value, excluded, (chunk) => {
    text += chunk;
  });
  return text;
}

const CHUNK_CHARS = 64 * 1024;

/**
 * The same canonical JSON through the engine's own serializer: `JSON.stringify(value, keys)` writes every
 * object's members in the order of `keys`, so the sorted list of every key in the document gives sorted
 * output at native speed. The engine checks each object against the whole list, so this is used only while
 * (objects x distinct keys) stays proportional to the document. Values it would write differently from
 * {@link canonicalJson} take the general path: `toJSON`, bigints, non-finite numbers, and a `__proto__` key
 * (the list would make the engine read every object's prototype under that name). Returns undefined when it
 * does not apply.
 */
function nativeCanonicalJson(value: unknown): string | undefined {
  const flat = flatCanonicalJson(value);
  if (flat !== null) return flat;
  const keys = new Set<string>();
  let objects = 0;
  let members = 0;
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const node = stack.pop();
    if (typeof node === 'number') {
      if (!Number.isFinite(node)) return undefined;
      continue;
    }
    if (typeof node === 'bigint') return undefined;
    if (node === null || typeof node !== 'object') continue;
    if (Array.isArray(node)) {
      for (const item of node) stack.push(item);
      continue;
    }
    if (typeof (node as { toJSON?: unknown }).toJSON === 'function') return undefined;
    // Not a plain object (a class instance, or something to refuse): the general path decides.
    const prototype = Object.getPrototypeOf(node);
    if (prototype !== Object.prototype && prototype !== null) return undefined;
    objects++;
    for (const name in node) {
      if (!Object.hasOwn(node, name)) continue;
      keys.add(name);
      members++;
      stack.push((node as Record<string, unknown>)[name]);
    }
  }
  if (keys.has('__proto__') || objects * keys.size > 16 * members + 1_024) return undefined;
  try {
    return JSON.stringify(value, [...keys].sort());
  } catch {
    return undefined; // nested deeper than the engine's serializer goes: the general path is iterative
  }
}

/**
 * The common body, one object of scalar members: its own sorted names are the whole key list, with no walk.
 * `null` when the value is not such an object (the walk decides then); undefined when the general path must.
 */
function flatCanonicalJson(value: unknown): string | undefined | null {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return null;
  if (typeof (value as { toJSON?: unknown }).toJSON === 'function') return undefined;
  const prototype = Object.getPrototypeOf(value);
  if (prototype !== Object.prototype && prototype !== null) return undefined;
  const names = Object.keys(value);
  for (const name of names) {
    const member = (value as Record<string, unknown>)[name];
    if (typeof member === 'object' && member !== null) return null;
    if (typeof member === 'bigint' || (typeof member === 'number' && !Number.isFinite(member)))
      return undefined;
    if (name === '__proto__') return undefined;
  }
  return JSON.stringify(value, names.sort());
}

function scalarJson(node: unknown): string {
  if (typeof node === 'number' && !Number.isFinite(node)) return String(node);
  if (typeof node === 'bigint') return node.toString();
  return JSON.stringify(node) ?? 'null';
}

/** An array or object being written: the value, where its members are, and how far along. */
interface Frame {
  readonly node: object;
  readonly path: string;
  /** The sorted member names of an object; undefined for an array. */
  readonly names: string[] | undefined;
  next: number;
  written: number;
}

/**
 * Write canonical JSON to `sink` in chunks of about 64 KiB, so that a large body is hashed as it is written
 * instead of being built whole in memory first. Iterative: a body nested deeper than the call stack (which
 * `JSON.parse` accepts) cannot overflow it.
 */
function writeCanonicalJson(
  value: unknown,
  excluded: ReadonlySet<string> | undefined,
  sink: (chunk: string) => void,
): void {
  let buffer = '';
  const emit = (text: string): void => {
    buffer += text;
    if (buffer.length >= CHUNK_CHARS) {
      sink(buffer);
      buffer = '';
    }
  };
  const stack: Frame[] = [];

  /** Write a scalar, or open a container (pushed on the stack and written member by member). */
  const open = (input: unknown, path: string): void => {
    // As JSON.stringify does: toJSON is called once, and what it returns is written as it is.
    const node =
      input !== null &&
      typeof input === 'object' &&
      typeof (input as { toJSON?: unknown }).toJSON === 'function'
        ? (input as { toJSON(): unknown }).toJSON()
        : input;
    if (node === null || typeof node !== 'object') {
      emit(scalarJson(node));
    } else if (Array.isArray(node)) {
      emit('[');
      stack.push({ node, path, names: undefined, next: 0, written: 0 });
    } else {
      const prototype = Object.getPrototypeOf(node);
      if (prototype !== Object.prototype && prototype !== null) refuseUnhashable(node, path);
      emit('{');
      stack.push({ node, path, names: Object.keys(node).sort(), next: 0, written: 0 });
    }
  };

  open(value, '');
  while (stack.length > 0) {
    const frame = stack[stack.length - 1] as Frame;
    if (frame.names === undefined) {
      const array = frame.node as unknown[];
      if (frame.next === array.length) {
        emit(']');
        stack.pop();
        continue;
      }
      const item = array[frame.next++];
      if (frame.written++ > 0) emit(',');
      if (item === undefined || typeof item === 'function' || typeof item === 'symbol') emit('null');
      else open(item, frame.path);
      continue;
    }
    if (frame.next === frame.names.length) {
      emit('}');
      stack.pop();
      continue;
    }
    const name = frame.names[frame.next++] as string;
    // An own `__proto__` member (JSON.parse makes those) shadows the accessor: it reads as the member it is.
    const member: unknown = (frame.node as Record<string, unknown>)[name];
    if (member === undefined || typeof member === 'function' || typeof member === 'symbol') continue;
    // Paths are only built when there is something to exclude: most requests never pay for them.
    const memberPath = excluded === undefined ? '' : frame.path === '' ? name : `${frame.path}.${name}`;
    if (excluded?.has(memberPath)) continue;
    emit(frame.written++ > 0 ? `,${JSON.stringify(name)}:` : `${JSON.stringify(name)}:`);
    open(member, memberPath);
  }
  if (buffer !== '') sink(buffer);
}
