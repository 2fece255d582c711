import { createHash } from 'node:crypto';

/** Query parameters as a framework hands them over: raw string, `URLSearchParams`, or a parsed object. */
export type QueryInput = string | URLSearchParams | Readonly<Record<string, unknown>>;

/** The request identity that a key is bound to. */
export interface FingerprintInput {
  /** HTTP method; case-insensitive. */
  readonly method: string;
  /** The route template (`/v1/namespaces/:namespace`) or the normalized path. */
  readonly route: string;
  readonly query?: QueryInput | undefined;
  /**
   * The request body: a parsed JSON value (object, array, primitive), or the raw bytes or text.
   * Raw bytes whose `contentType` is JSON are parsed so that key order and whitespace do not matter.
   */
  readonly body?: unknown;
  /** The request's `Content-Type`, used to recognise raw JSON bodies. */
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
 * SHA-256 (hex) over method, route, sorted query and body. JSON bodies are canonicalized (object keys
 * sorted, insignificant whitespace dropped), so the same logical request always gives the same fingerprint;
 * other bodies are hashed as raw bytes. Runs in time linear in the body size (plus key sorting).
 */
export function computeFingerprint(input: FingerprintInput, options: FingerprintOptions = {}): string {
  const hash = createHash('sha256');
  hash.update(
    JSON.stringify(['idem-fp-v1', input.method.toUpperCase(), input.route, canonicalQuery(input.query)]),
  );
  const excluded = options.excludeFields?.length ? new Set(options.excludeFields) : undefined;
  const body = classifyBody(input.body, input.contentType);
  if (body.kind === 'none') {
    hash.update('\nnone');
  } else if (body.kind === 'bytes') {
    hash.update('\nbytes\n');
    hash.update(body.bytes);
  } else {
    hash.update('\njson\n');
    const fast = excluded === undefined ? nativeCanonicalJson(body.value) : undefined;
    if (fast !== undefined) hash.update(fast);
    else writeCanonicalJson(body.value, excluded, (chunk) => hash.update(chunk));
  }
  return hash.digest('hex');
}

type ClassifiedBody =
  | { kind: 'none' }
  | { kind: 'bytes'; bytes: Uint8Array | string }
  | { kind: 'json'; value: unknown };

function classifyBody(body: unknown, contentType: string | undefined): ClassifiedBody {
  if (body === undefined || body === null) {
    return { kind: 'none' };
  }
  if (typeof body === 'string' || body instanceof Uint8Array) {
    if (body.length === 0) {
      return { kind: 'none' };
    }
    if (contentType !== undefined && JSON_CONTENT_TYPE.test(contentType)) {
      try {
        const text =
          typeof body === 'string' ? body : Buffer.from(body.buffer, body.byteOffset, body.length).toString();
        return { kind: 'json', value: JSON.parse(text) };
      } catch {
        // Not valid JSON after all: the raw bytes are the identity.
      }
    }
    return { kind: 'bytes', bytes: body };
  }
  return { kind: 'json', value: body };
}

function canonicalQuery(query: QueryInput | undefined): [string, string][] {
  if (query === undefined) {
    return [];
  }
  const pairs: [string, string][] = [];
  if (typeof query === 'string' || query instanceof URLSearchParams) {
    const params = typeof query === 'string' ? new URLSearchParams(query.replace(/^\?/, '')) : query;
    for (const [name, value] of params) {
      pairs.push([name, value]);
    }
  } else {
    for (const [name, value] of Object.entries(query)) {
      for (const item of Array.isArray(value) ? value : [value]) {
        if (item !== undefined) {
          pairs.push([name, typeof item === 'string' ? item : canonicalJson(item, undefined)]);
        }
      }
    }
  }
  return pairs.sort(([a, av], [b, bv]) => (a < b ? -1 : a > b ? 1 : av < bv ? -1 : av > bv ? 1 : 0));
}

/**
 * Canonical JSON: object keys sorted by code unit, no whitespace, `undefined` members dropped, the rest as
 * `JSON.stringify` writes it. `excluded` holds dotted paths of object members to leave out.
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
 * (objects x distinct keys) stays proportional to the document; values with `toJSON` or a bigint take the
 * general path. Returns undefined when it does not apply.
 */
function nativeCanonicalJson(value: unknown): string | undefined {
  const keys = new Set<string>();
  let objects = 0;
  let members = 0;
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const node = stack.pop();
    if (typeof node === 'bigint') return undefined;
    if (node === null || typeof node !== 'object') continue;
    if (Array.isArray(node)) {
      for (const item of node) stack.push(item);
      continue;
    }
    if (typeof (node as { toJSON?: unknown }).toJSON === 'function') return undefined;
    objects++;
    for (const name in node) {
      if (!Object.hasOwn(node, name)) continue;
      keys.add(name);
      members++;
      stack.push((node as Record<string, unknown>)[name]);
    }
  }
  if (objects * keys.size > 16 * members + 1_024) return undefined;
  return JSON.stringify(value, [...keys].sort());
}

/**
 * Write canonical JSON to `sink` in chunks of about 64 KiB, so that a large body is hashed as it is written
 * instead of being built whole in memory first.
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

  const write = (node: unknown, path: string): void => {
    if (node === null || typeof node !== 'object') {
      emit(typeof node === 'bigint' ? node.toString() : (JSON.stringify(node) ?? 'null'));
      return;
    }
    if (typeof (node as { toJSON?: unknown }).toJSON === 'function') {
      write((node as { toJSON(): unknown }).toJSON(), path);
      return;
    }
    if (Array.isArray(node)) {
      emit('[');
      for (let i = 0; i < node.length; i++) {
        if (i > 0) emit(',');
        const item: unknown = node[i];
        if (item === undefined || typeof item === 'function' || typeof item === 'symbol') emit('null');
        else write(item, path);
      }
      emit(']');
      return;
    }
    emit('{');
    let first = true;
    for (const name of Object.keys(node).sort()) {
      const member: unknown = (node as Record<string, unknown>)[name];
      if (member === undefined || typeof member === 'function' || typeof member === 'symbol') continue;
      // Paths are only built when there is something to exclude: most requests never pay for them.
      const memberPath = excluded === undefined ? '' : path === '' ? name : `${path}.${name}`;
      if (excluded?.has(memberPath)) continue;
      emit(first ? `${JSON.stringify(name)}:` : `,${JSON.stringify(name)}:`);
      first = false;
      write(member, memberPath);
    }
    emit('}');
  };

  write(value, '');
  if (buffer !== '') sink(buffer);
}
