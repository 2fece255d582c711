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
