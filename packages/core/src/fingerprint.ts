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
    hash.update(canonicalJson(body.value, excluded));
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
  const parts: string[] = [];
  writeCanonical(value, '', excluded, parts);
  return parts.join('');
}

function writeCanonical(
  value: unknown,
  path: string,
  excluded: ReadonlySet<string> | undefined,
  out: string[],
): void {
  if (
    value !== null &&
    typeof value === 'object' &&
    typeof (value as { toJSON?: unknown }).toJSON === 'function'
  ) {
    writeCanonical((value as { toJSON(): unknown }).toJSON(), path, excluded, out);
    return;
  }
  if (Array.isArray(value)) {
    out.push('[');
    for (let i = 0; i < value.length; i++) {
      if (i > 0) out.push(',');
      const item: unknown = value[i];
      if (item === undefined || typeof item === 'function' || typeof item === 'symbol') {
        out.push('null');
      } else {
        writeCanonical(item, path, excluded, out);
      }
    }
    out.push(']');
    return;
  }
  if (value !== null && typeof value === 'object') {
    out.push('{');
    let first = true;
    for (const name of Object.keys(value).sort()) {
      const member: unknown = (value as Record<string, unknown>)[name];
      const memberPath = path === '' ? name : `${path}.${name}`;
      if (member === undefined || typeof member === 'function' || typeof member === 'symbol') continue;
      if (excluded?.has(memberPath)) continue;
      if (!first) out.push(',');
      first = false;
      out.push(JSON.stringify(name), ':');
      writeCanonical(member, memberPath, excluded, out);
    }
    out.push('}');
    return;
  }
  out.push(typeof value === 'bigint' ? value.toString() : (JSON.stringify(value) ?? 'null'));
}
