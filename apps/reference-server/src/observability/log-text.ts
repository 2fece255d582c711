// biome-ignore lint/suspicious/noControlCharactersInRegex: these are the characters escaped.
const UNSAFE = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;
const MAX_CHARS = 256;

/**
 * Text from a request, fit for a log line: control, line-separator and bidirectional-override characters
 * become `\u{…}` escapes (a key or a name can then neither forge a line nor reorder one on a terminal), and it
 * is cut at 256 characters.
 */
export function logText(text: string): string {
  const cut = text.length > MAX_CHARS ? `${text.slice(0, MAX_CHARS)}…` : text;
  return cut.replace(UNSAFE, (char) => `\\u{${(char.codePointAt(0) as number).toString(16)}}`);
}
