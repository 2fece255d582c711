// The one way `idem` writes a stored scope, key, header, fingerprint or owner on a terminal, and reads a scope or
// key back from its command line: what it prints can be given back to it and finds the same record.
//
// Escaped are the backslash itself (`\\`) and what a stored value could rewrite the operator's terminal with or
// hide text behind: C0 controls, DEL, C1 controls (U+009B is a CSI by itself), the bidi overrides, isolates and
// marks, the invisible ones (zero-width space and joiners, word joiner, byte order mark) and the line and
// paragraph separators. Line feed, carriage return and tab are `\n`, `\r`, `\t`; the others `\xHH` (below U+0100) or `\uHHHH`.
// Because the backslash is escaped too, every escaped text reads back to exactly one string, and a scope that
// holds the text `\x1f` (four characters) is told apart from one that holds U+001F.

// biome-ignore lint/suspicious/noControlCharactersInRegex: these are the characters escaped.
const ESCAPED = /[\\\u0000-\u001f\u007f-\u009f\u061c\u200b-\u200f\u2028-\u202e\u2060\u2066-\u2069\ufeff]/g;
const SHORT: Readonly<Record<string, string>> = { '\\': '\\\\', '\n': '\\n', '\r': '\\r', '\t': '\\t' };
const READ: Readonly<Record<string, string>> = { '\\': '\\', n: '\n', r: '\r', t: '\t' };
const ESCAPE = /\\(x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|[\\nrt])?/g;

/** How the empty string is shown: as a shell spells it, `--scope ''`. */
const EMPTY = "''";
/** How a value that is the two characters `''` is shown, so that it is not taken for the empty one. */
const QUOTES = '\\x27\\x27';

/** `text` as one inert line: the backslash and each control character written as its escape. */
export function escapeValue(text: string): string {
  return text.replace(ESCAPED, (char) => {
    const code = char.charCodeAt(0);
    return (
      SHORT[char] ??
      (code < 0x100 ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16).padStart(4, '0')}`)
    );
  });
}

/** A backslash in a value read back that starts none of the escapes `idem` writes. */
export class EscapeError extends Error {
  constructor(
    /** Where the backslash is, counted from 1. */
    readonly at: number,
  ) {
    super(
      `the backslash at character ${at} starts no escape (\\\\, \\n, \\r, \\t, \\xHH, \\uHHHH): write a backslash itself as \\\\`,
    );
    this.name = 'EscapeError';
  }
}

/**
 * The string {@link escapeValue} wrote `text` from: each escape read back, every other character (a literal
 * control character too) as it is. A backslash that starts no escape throws an {@link EscapeError}, rather than
 * guess whether it meant itself.
 */
export function unescapeValue(text: string): string {
  return text.replace(ESCAPE, (_match, sequence: string | undefined, offset: number) => {
    // Counted in characters as the operator sees them, not UTF-16 units (an emoji before it is one).
    if (sequence === undefined) throw new EscapeError([...text.slice(0, offset)].length + 1);
    return READ[sequence] ?? String.fromCharCode(Number.parseInt(sequence.slice(1), 16));
  });
}

/**
 * A scope or key as `idem` shows it: {@link escapeValue}, and the empty string as `''` (how a shell spells it).
 * Messages put it between double quotes.
 */
export function shownValue(text: string): string {
  if (text === '') return EMPTY;
  const escaped = escapeValue(text);
  return escaped === EMPTY ? QUOTES : escaped;
}

/** A scope or key from the command line: the form {@link shownValue} wrote read back (`''` is the empty one). */
export const readValue = (text: string): string => (text === EMPTY ? '' : unescapeValue(text));
