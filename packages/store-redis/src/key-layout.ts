/** The prefix of every record key when none is given. */
export const DEFAULT_PREFIX = 'idem:';

// Everything outside this set is escaped, so that no brace (the Cluster hash tag), no colon (our separator) and
// no byte that a terminal or a log would mangle ever comes from the caller's data.
const UNSAFE = /[^A-Za-z0-9._~-]/gu;
const SAFE = /^[A-Za-z0-9._~-]*$/;

function escapeChar(char: string): string {
  const code = char.charCodeAt(0);
  // A lone surrogate (the `u` flag hands it over alone) has no UTF-8 form: keep its code unit as %uXXXX, which
  // no %XX escape can be confused with, so two different strings never share a key.
  if (char.length === 1 && code >= 0xd800 && code <= 0xdfff) return `%u${code.toString(16).padStart(4, '0')}`;
  let out = '';
  for (const byte of Buffer.from(char, 'utf8')) out += `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  return out;
}

/** A lossless, readable encoding of any JS string that holds no `{`, `}` or `:`. */
export const escapeKeyPart = (value: string): string =>
  SAFE.test(value) ? value : value.replace(UNSAFE, escapeChar);

const HEX_BYTE = /^[0-9A-F]{2}$/;
const HEX_UNIT = /^[0-9a-f]{4}$/;
const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * The string {@link escapeKeyPart} made `escaped` from, or `undefined` when no string escapes to it exactly (an
 * escape of a safe character, lower-case `%xx`, a `%uXXXX` that is no lone surrogate, bytes that are no UTF-8):
 * one record has exactly one key name, so a name in any other spelling is not one the store wrote.
 */
export function unescapeKeyPart(escaped: string): string | undefined {
  let out = '';
  let bytes: number[] = [];
  const flush = (): boolean => {
    if (bytes.length === 0) return true;
    try {
      out += utf8.decode(Uint8Array.from(bytes));
    } catch {
      return false;
    }
    bytes = [];
    return true;
  };
  for (let at = 0; at < escaped.length; ) {
    const char = escaped[at] as string;
    if (char !== '%') {
      if (!SAFE.test(char) || !flush()) return undefined;
      out += char;
      at += 1;
    } else if (escaped[at + 1] === 'u') {
      const unit = escaped.slice(at + 2, at + 6);
      if (!HEX_UNIT.test(unit) || !flush()) return undefined;
      out += String.fromCharCode(Number.parseInt(unit, 16));
      at += 6;
    } else {
      const byte = escaped.slice(at + 1, at + 3);
      if (!HEX_BYTE.test(byte)) return undefined;
      bytes.push(Number.parseInt(byte, 16));
      at += 3;
    }
  }
  if (!flush()) return undefined;
  return escapeKeyPart(out) === escaped ? out : undefined;
}

/**
 * The (scope, key) of a record from the part of its key name after the prefix, `{<scope>:<key>}` escaped, or
 * `undefined` when the store would never have written that name.
 */
export function parseRecordTag(tag: string): { scope: string; key: string } | undefined {
  if (!tag.startsWith('{') || !tag.endsWith('}')) return undefined;
  const inner = tag.slice(1, -1);
  const colon = inner.indexOf(':');
  if (colon === -1) return undefined;
  const scope = unescapeKeyPart(inner.slice(0, colon));
  const key = unescapeKeyPart(inner.slice(colon + 1));
  return scope === undefined || key === undefined ? undefined : { scope, key };
}

/**
 * `bytes` as a literal in a Redis glob pattern (SCAN's MATCH): a backslash before each `*`, `?`, `[`, `]` and `\`,
 * byte by byte, since a prefix (the store's, or the client's `keyPrefix`) may hold any of them.
 */
export function globLiteral(bytes: Buffer): Buffer {
  const out: number[] = [];
  for (const byte of bytes) {
    if (byte === 0x2a || byte === 0x3f || byte === 0x5b || byte === 0x5d || byte === 0x5c) out.push(0x5c);
    out.push(byte);
  }
  return Buffer.from(out);
}

/**
 * Check a key prefix: a brace in it would become the Cluster hash tag of every record and put them all in one
 * slot, so it is refused.
 */
export function checkPrefix(prefix: string): string {
  if (typeof prefix !== 'string' || /[{}]/.test(prefix)) {
    throw new TypeError(`prefix must be a string without '{' or '}', got ${JSON.stringify(prefix)}`);
  }
  return prefix;
}

/**
 * The one Redis key of a record: `<prefix>{<scope>:<key>}`, both parts escaped. The braces are the Cluster hash
 * tag: only the store writes braces, so user data can never choose the slot (a `{` in a scope cannot hijack the
 * tag and pile many records onto one node), and records spread over every slot by their identity. Escaping
 * also keeps scope and key apart: `(ab, c)` and `(a, bc)` are `{ab:c}` and `{a:bc}`.
 */
export const recordKey = (prefix: string, scope: string, key: string): string =>
  `${prefix}{${escapeKeyPart(scope)}:${escapeKeyPart(key)}}`;
