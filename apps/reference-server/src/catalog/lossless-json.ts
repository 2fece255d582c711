import { parse, stringify } from 'lossless-json';

// JSON whose numbers keep the value their text denotes. Iceberg ids are 64-bit (the Java client draws snapshot ids
// from the whole range), and JSON.parse rounds every integer past 2^53 to a nearby double: a commit would then
// point at a snapshot id the client never wrote. Here:
//
// - a number whose value is an integer, however it is written (7, 7.0, 7e0, 70e-1), is a `number` when that is a
//   safe integer (|n| ≤ 2^53 − 1) and a `bigint` otherwise. One representation per value: `===`, `Set`
//   membership and `Array#includes` compare ids exactly, and -0 is 0.
// - any other number is the nearest double, as JSON.parse makes it.
// - a number beyond a double's range (1e400, which JSON.parse makes Infinity) has no value: parsing fails, or the
//   caller's `beyondRange` marks where it was.
// - objects are built as JSON.parse builds them: `__proto__` is an own key like any other, and of duplicate keys
//   the last wins (lossless-json would refuse them).
//
// Writing is the reverse: a bigint as its digits (never a string, never rounded), everything else as
// JSON.stringify writes it.

/** Why a text could not be parsed. */
export type JsonProblem = 'syntax' | 'depth' | 'range';

/** JSON text that cannot be parsed, and why (`problem`); the message never quotes the text. */
export class JsonTextError extends Error {
  constructor(
    readonly problem: JsonProblem,
    message: string,
  ) {
    super(message);
  }
}

export interface ParseOptions {
  /** Containers nested deeper are refused before parsing: the parser is recursive. */
  readonly maxDepth: number;
  /** What a number beyond a double's range becomes; without it, parsing fails with `range`. */
  readonly beyondRange?: () => unknown;
}

/**
 * The value of one JSON number token (already checked against JSON's grammar): a safe integer or a double as a
 * number, any other integer as a bigint, undefined beyond a double's range. Linear in the token's length.
 */
export function exactNumber(token: string): number | bigint | undefined {
  const double = Number(token);
  if (!Number.isFinite(double)) return undefined;
  const e = token.search(/[eE]/);
  const mantissa = e === -1 ? token : token.slice(0, e);
  const exponent = e === -1 ? 0 : Number(token.slice(e + 1));
  const negative = mantissa.startsWith('-');
  const dot = mantissa.indexOf('.');
  const whole = mantissa.slice(negative ? 1 : 0, dot === -1 ? undefined : dot);
  const fraction = dot === -1 ? '' : mantissa.slice(dot + 1);
  let first = 0;
  const digits = whole + fraction;
  while (first < digits.length && digits.charCodeAt(first) === 0x30) first++;
  if (first === digits.length) return 0; // every zero, -0 and 0.0e5 among them
  let end = digits.length;
  while (digits.charCodeAt(end - 1) === 0x30) end--;
  // The value is digits[first, end) × 10^scale.
  const scale = exponent - fraction.length + (digits.length - end);
  if (scale < 0) return double; // it has a fractional part
  // A safe double is exact, and an integer past 2^53 − 1 never rounds to one.
  if (Number.isSafeInteger(double)) return double;
  // A finite double bounds the value below 1.8e308: at most 309 digits.
  return BigInt(`${negative ? '-' : ''}${digits.slice(first, end)}`) * 10n ** BigInt(scale);
}

/** Whether containers nest deeper than `max` anywhere in `text` (strings skipped). Linear, not recursive. */
function nestsDeeper(text: string, max: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++;
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) {
      inString = true;
    } else if (c === 0x5b || c === 0x7b) {
      if (++depth > max) return true;
    } else if (c === 0x5d || c === 0x7d) {
      depth--;
    }
  }
  return false;
}

/** Parse JSON text with exact numbers (see above). Throws a {@link JsonTextError}, whose message never quotes the text. */
export function parseLosslessJson(text: string, options: ParseOptions): unknown {
  if (nestsDeeper(text, options.maxDepth))
    throw new JsonTextError('depth', `nests deeper than ${options.maxDepth} levels`);
  const parseNumber = (token: string) => {
    const value = exactNumber(token);
    if (value !== undefined) return value;
    if (options.beyondRange === undefined)
      throw new JsonTextError('range', 'holds a number beyond the range of a double');
    return options.beyondRange();
  };
  try {
    return parse(text, null, { parseNumber, onDuplicateKey: ({ newValue }) => newValue });
  } catch (error) {
    if (error instanceof JsonTextError) throw error;
    // lossless-json's messages quote the text.
    throw new JsonTextError('syntax', 'is not valid JSON');
  }
}

/** JSON text of a value, bigints as their digits. */
export function stringifyLosslessJson(value: unknown): string {
  const text = stringify(value);
  if (text === undefined) throw new TypeError('the value has no JSON text');
  return text;
}
