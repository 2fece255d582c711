/**
 * The exact canonical JSON of {@link exactCanonicalJson}, read from and written to bytes: the fast path of the
 * request fingerprint for a raw JSON body. Same output, byte for byte, as encoding that function's result to
 * UTF-8; the string reader stays the reference, and takes over where this one declines.
 *
 * Two passes over the body, no string per token:
 *
 * 1. Read and validate the text (UTF-8 too: bytes from 0x80 only ever appear inside strings) into a tape of
 *    nodes (4 integers each: kind, two offsets, the index after the node's subtree), in document order. An
 *    object's members are sorted by name once it closes, and their node indices kept in `order`; of a repeated
 *    name, the last one counts.
 * 2. Write the tape out: objects in their members' sorted order, strings without a backslash as their bytes
 *    (already what `JSON.stringify` writes), strings with one re-escaped, numbers and words as written. Every
 *    byte is written once, however deep the document, so the time stays linear.
 *
 * Member names with a backslash are left to the string reader ({@link NEEDS_TEXT}): the name it denotes is
 * then not its bytes, and sorting and comparing them would need decoding.
 */

import { MAX_DEPTH } from './exact-json.js';
import {
  BACKSLASH,
  CLOSE_BRACE,
  CLOSE_BRACKET,
  COLON,
  COMMA,
  LINE_FEED,
  MINUS,
  NINE,
  OPEN_BRACE,
  OPEN_BRACKET,
  QUOTE,
  RETURN,
  SPACE,
  TAB,
  ZERO,
} from './json-chars.js';

/** Not one JSON value (or not UTF-8, or nested deeper than {@link MAX_DEPTH}): the raw bytes are the identity. */
export const NOT_JSON = -1;
/** A document this reader leaves to the string one (a member name with an escape). */
export const NEEDS_TEXT = -2;

// Node kinds on the tape.
const RAW = 0; // bytes [a, b) as they are: a number, a word, a string without a backslash
const ESCAPED = 1; // a string with escapes at [a, b), quotes included
const ARRAY = 2;
const OBJECT = 3; // its members' node indices at order[a, a + b), sorted
const MEMBER = 4; // a name's bytes [a, b) between its quotes, followed by its value's node

// Character codes (the rest in json-chars.ts).
const DOT = 0x2e;

/** Scratch kept between calls up to this many integers; a larger body's is dropped after it. */
const KEEP_INTS = 1 << 16;

let tape: Int32Array = new Int32Array(1_024);
/** Member node indices of the objects being read, innermost last. */
let members: Int32Array = new Int32Array(256);
/** Every object's member node indices, sorted, as pass 1 closes it. */
let order: Int32Array = new Int32Array(256);
// Per open container (pass 1), then per container being written (pass 2).
const frameNode = new Int32Array(MAX_DEPTH + 1);
const frameBase = new Int32Array(MAX_DEPTH + 1);
const frameEnd = new Int32Array(MAX_DEPTH + 1);
const framePath: string[] = [];

function grown(array: Int32Array, needed: number): Int32Array {
  const next = new Int32Array(Math.max(needed, array.length * 2));
  next.set(array);
  return next;
}

/** 1 for the bytes a string holds as they are: printable ASCII other than `"` and `\`. */
const PLAIN = new Uint8Array(256);
for (let c = SPACE; c < 0x80; c++) if (c !== QUOTE && c !== BACKSLASH) PLAIN[c] = 1;

/** JSON's whitespace; anything above a space (nearly every byte read) is told apart by one comparison. */
const isSpace = (c: number): boolean =>
  c <= SPACE && (c === SPACE || c === LINE_FEED || c === RETURN || c === TAB);

function isHex(c: number): boolean {
  return (c >= ZERO && c <= NINE) || ((c | 0x20) >= 0x61 && (c | 0x20) <= 0x66);
}

function hexValue(c: number): number {
  return c <= NINE ? c - ZERO : (c | 0x20) - 0x61 + 10;
}

/**
 * The length of the well-formed UTF-8 sequence starting with byte `c` (>= 0x80) at `i`, or 0 when it is not
 * one: overlong forms, UTF-16 surrogates, code points past U+10FFFF and truncated sequences are refused, as
 * `isUtf8` refuses them.
 */
function utf8Length(src: Uint8Array, i: number, end: number, c: number): number {
  if (c < 0xc2) return 0;
  if (c < 0xe0) return i + 1 < end && ((src[i + 1] as number) & 0xc0) === 0x80 ? 2 : 0;
  if (c < 0xf0) {
    if (i + 2 >= end) return 0;
    const c1 = src[i + 1] as number;
    const low = c === 0xe0 ? 0xa0 : 0x80;
    const high = c === 0xed ? 0x9f : 0xbf;
    return c1 >= low && c1 <= high && ((src[i + 2] as number) & 0xc0) === 0x80 ? 3 : 0;
  }
  if (c < 0xf5) {
    if (i + 3 >= end) return 0;
    const c1 = src[i + 1] as number;
    const low = c === 0xf0 ? 0x90 : 0x80;
    const high = c === 0xf4 ? 0x8f : 0xbf;
    return c1 >= low &&
      c1 <= high &&
      ((src[i + 2] as number) & 0xc0) === 0x80 &&
      ((src[i + 3] as number) & 0xc0) === 0x80
      ? 4
      : 0;
  }
  return 0;
}

/**
 * Two member names (their nodes' byte ranges) in UTF-16 code unit order, as the string reader sorts them.
 * UTF-8 bytes sort by code point, which is the same order except that a code point from U+10000 (UTF-16
 * surrogates, lead byte 0xF0–0xF4) sorts before U+E000–U+FFFF (lead bytes 0xEE, 0xEF) in UTF-16: those two
 * lead bytes are moved past 0xF4. Two names first differ either at two lead bytes or at two continuation
 * bytes of sequences with the same lead byte, which sort alike in both orders.
 */
function compareNames(src: Uint8Array, t: Int32Array, x: number, y: number): number {
  let i = t[x + 1] as number;
  const iEnd = t[x + 2] as number;
  let j = t[y + 1] as number;
  const jEnd = t[y + 2] as number;
  for (; i < iEnd && j < jEnd; i++, j++) {
    let a = src[i] as number;
    let b = src[j] as number;
    if (a !== b) {
      if (a === 0xee || a === 0xef) a += 0x10;
      if (b === 0xee || b === 0xef) b += 0x10;
      return a - b;
    }
  }
  return iEnd - i - (jEnd - j);
}

/** A member name as a string, for its path (only built when there are fields to exclude). */
function nameText(src: Uint8Array, from: number, to: number, ascii: boolean): string {
  if (!ascii) return Buffer.from(src.buffer, src.byteOffset + from, to - from).toString('utf8');
  let text = '';
  for (let k = from; k < to; k++) text += String.fromCharCode(src[k] as number);
  return text;
}

/**
 * Sorts the member nodes `members[from, to)` by name, stably, then appends them to `order` without all but
 * the last of each repeated name. Returns the new end of `order`.
 */
function closeMembers(src: Uint8Array, t: Int32Array, from: number, to: number, at: number): number {
  const list = members;
  if (to - from > 16) {
    const sorted = Array.from(list.subarray(from, to)).sort((x, y) => compareNames(src, t, x, y));
    list.set(sorted, from);
  } else {
    for (let k = from + 1; k < to; k++) {
      const node = list[k] as number;
      let m = k - 1;
      while (m >= from && compareNames(src, t, list[m] as number, node) > 0) {
        list[m + 1] = list[m] as number;
        m--;
      }
      list[m + 1] = node;
    }
  }
  if (at + (to - from) > order.length) order = grown(order, at + (to - from));
  const into = order;
  let o = at;
  for (let k = from; k < to; k++) {
    const node = list[k] as number;
    if (k + 1 < to && compareNames(src, t, node, list[k + 1] as number) === 0) continue;
    into[o++] = node;
  }
  return o;
}

/**
 * Pass 1: reads `src[0, end)` onto the tape (the root at node 0). Returns 0, {@link NOT_JSON} or
 * {@link NEEDS_TEXT}.
 */
function read(src: Uint8Array, end: number, excluded: ReadonlySet<string> | undefined): number {
  const plain = PLAIN; // a local: the engine reloads a module's binding on every pass of a loop
  let t = tape;
  let size = 0; // tape length
  let top = 0; // members length
  let orderEnd = 0;
  let depth = 0;
  let i = 0;
  let path = '';
  let name = false; // a member name comes before the next value
  for (;;) {
    while (i < end && isSpace(src[i] as number)) i++;
    if (size + 8 > t.length) tape = t = grown(t, size + 8);
    if (name) {
      // `"name":` of the object frame at depth - 1.
      name = false;
      if (i >= end || src[i] !== QUOTE) return NOT_JSON;
      const from = ++i;
      let ascii = true;
      for (;;) {
        while (i < end && plain[src[i] as number] === 1) i++;
        if (i >= end) return NOT_JSON;
        const c = src[i] as number;
        if (c === QUOTE) break;
        if (c < SPACE) return NOT_JSON;
        if (c === BACKSLASH) return NEEDS_TEXT;
        if (c < 0x80) {
          i++;
          continue;
        }
        const length = utf8Length(src, i, end, c);
        if (length === 0) return NOT_JSON;
        ascii = false;
        i += length;
      }
      const node = size;
      size += 4;
      t[node] = MEMBER;
      t[node + 1] = from;
      t[node + 2] = i;
      t[node + 3] = size;
      i++;
      while (i < end && isSpace(src[i] as number)) i++;
      if (i >= end || src[i] !== COLON) return NOT_JSON;
      i++;
      let skip = false;
      if (excluded !== undefined) {
        const parent = framePath[depth - 1] as string;
        const text = nameText(src, from, t[node + 2] as number, ascii);
        path = parent === '' ? text : `${parent}.${text}`;
        skip = excluded.has(path);
      }
      if (!skip) {
        if (top === members.length) members = grown(members, top + 1);
        members[top++] = node;
      }
      continue;
    }

    // A value starts at i.
    if (i >= end) return NOT_JSON;
    const c = src[i] as number;
    const node = size;
    size += 4;
    if (c === OPEN_BRACE || c === OPEN_BRACKET) {
      if (depth === MAX_DEPTH) return NOT_JSON;
      i++;
      while (i < end && isSpace(src[i] as number)) i++;
      t[node] = c === OPEN_BRACE ? OBJECT : ARRAY;
      t[node + 1] = orderEnd;
      t[node + 2] = 0;
      if (i < end && src[i] === (c === OPEN_BRACE ? CLOSE_BRACE : CLOSE_BRACKET)) {
        i++;
        t[node + 3] = size;
      } else {
        frameNode[depth] = node;
        frameBase[depth] = c === OPEN_BRACE ? top : -1;
        if (excluded !== undefined) framePath[depth] = path;
        depth++;
        name = c === OPEN_BRACE;
        continue;
      }
    } else if (c === QUOTE) {
      const from = i++;
      let kind = RAW;
      for (;;) {
        while (i < end && plain[src[i] as number] === 1) i++;
        if (i >= end) return NOT_JSON;
        const d = src[i] as number;
        if (d === QUOTE) break;
        if (d === BACKSLASH) {
          if (i + 1 >= end) return NOT_JSON;
          const e = src[i + 1] as number;
          if (e === 0x75 /* u */) {
            if (
              i + 5 >= end ||
              !isHex(src[i + 2] as number) ||
              !isHex(src[i + 3] as number) ||
              !isHex(src[i + 4] as number) ||
              !isHex(src[i + 5] as number)
            ) {
              return NOT_JSON;
            }
            i += 6;
          } else if (
            e === QUOTE ||
            e === BACKSLASH ||
            e === 0x2f /* / */ ||
            e === 0x62 /* b */ ||
            e === 0x66 /* f */ ||
            e === 0x6e /* n */ ||
            e === 0x72 /* r */ ||
            e === 0x74 /* t */
          ) {
            i += 2;
          } else {
            return NOT_JSON;
          }
          kind = ESCAPED;
          continue;
        }
        if (d < SPACE) return NOT_JSON;
        if (d < 0x80) {
          i++;
          continue;
        }
        const length = utf8Length(src, i, end, d);
        if (length === 0) return NOT_JSON;
        i += length;
      }
      i++;
      t[node] = kind;
      t[node + 1] = from;
      t[node + 2] = i;
      t[node + 3] = size;
    } else if (c === MINUS || (c >= ZERO && c <= NINE)) {
      const from = i;
      if (c === MINUS) i++;
      if (i >= end) return NOT_JSON;
      const first = src[i] as number;
      if (first === ZERO) i++;
      else if (first > ZERO && first <= NINE) {
        i++;
        while (i < end && (src[i] as number) >= ZERO && (src[i] as number) <= NINE) i++;
      } else return NOT_JSON;
      if (i < end && src[i] === DOT) {
        i++;
        if (i >= end || (src[i] as number) < ZERO || (src[i] as number) > NINE) return NOT_JSON;
        while (i < end && (src[i] as number) >= ZERO && (src[i] as number) <= NINE) i++;
      }
      if (i < end && (src[i] === 0x65 || src[i] === 0x45) /* e E */) {
        i++;
        if (i < end && (src[i] === 0x2b || src[i] === MINUS) /* + - */) i++;
        if (i >= end || (src[i] as number) < ZERO || (src[i] as number) > NINE) return NOT_JSON;
        while (i < end && (src[i] as number) >= ZERO && (src[i] as number) <= NINE) i++;
      }
      t[node] = RAW;
      t[node + 1] = from;
      t[node + 2] = i;
      t[node + 3] = size;
    } else {
      // true, false, null
      const word = c === 0x74 ? TRUE : c === 0x66 ? FALSE : c === 0x6e ? NULL : undefined;
      if (word === undefined || i + word.length > end) return NOT_JSON;
      for (let k = 1; k < word.length; k++) if (src[i + k] !== word[k]) return NOT_JSON;
      t[node] = RAW;
      t[node + 1] = i;
      t[node + 2] = i + word.length;
      t[node + 3] = size;
      i += word.length;
    }

    // A value is complete: close every container it completes.
    for (;;) {
      while (i < end && isSpace(src[i] as number)) i++;
      if (depth === 0) return i === end ? 0 : NOT_JSON;
      if (i >= end) return NOT_JSON;
      const next = src[i] as number;
      const frame = depth - 1;
      const base = frameBase[frame] as number;
      if (base >= 0) {
        if (next === COMMA) {
          i++;
          name = true;
          break;
        }
        if (next !== CLOSE_BRACE) return NOT_JSON;
        const object = frameNode[frame] as number;
        const from = orderEnd;
        orderEnd = closeMembers(src, t, base, top, orderEnd);
        top = base;
        t[object + 1] = from;
        t[object + 2] = orderEnd - from;
        t[object + 3] = size;
      } else {
        if (next === COMMA) {
          i++;
          if (excluded !== undefined) path = framePath[frame] as string;
          break;
        }
        if (next !== CLOSE_BRACKET) return NOT_JSON;
        t[(frameNode[frame] as number) + 3] = size;
      }
      i++;
      depth--;
    }
  }
}

const TRUE = Uint8Array.of(0x74, 0x72, 0x75, 0x65);
const FALSE = Uint8Array.of(0x66, 0x61, 0x6c, 0x73, 0x65);
const NULL = Uint8Array.of(0x6e, 0x75, 0x6c, 0x6c);
const HEX = Uint8Array.from('0123456789abcdef', (c) => c.charCodeAt(0));

/** `\u` and four lower-case hex digits, as `JSON.stringify` writes a control character or lone surrogate. */
function writeUnicodeEscape(out: Uint8Array, at: number, unit: number): number {
  out[at] = BACKSLASH;
  out[at + 1] = 0x75;
  out[at + 2] = HEX[unit >> 12] as number;
  out[at + 3] = HEX[(unit >> 8) & 15] as number;
  out[at + 4] = HEX[(unit >> 4) & 15] as number;
  out[at + 5] = HEX[unit & 15] as number;
  return at + 6;
}

/** Short escapes `JSON.stringify` writes for control characters, by code; 0 where it writes `\u00xx`. */
const SHORT_ESCAPE = new Uint8Array(0x20);
SHORT_ESCAPE[0x08] = 0x62; // b
SHORT_ESCAPE[0x09] = 0x74; // t
SHORT_ESCAPE[0x0a] = 0x6e; // n
SHORT_ESCAPE[0x0c] = 0x66; // f
SHORT_ESCAPE[0x0d] = 0x72; // r

/** The code unit of the (validated) `\uXXXX` escape at `at`. */
function unitAt(src: Uint8Array, at: number): number {
  return (
    (hexValue(src[at + 2] as number) << 12) |
    (hexValue(src[at + 3] as number) << 8) |
    (hexValue(src[at + 4] as number) << 4) |
    hexValue(src[at + 5] as number)
  );
}

/**
 * The string token `src[from, to)` (quotes included, escapes validated by pass 1) as `JSON.stringify` writes
 * the string it denotes: `"` and `\` escaped, control characters as their short escape or `\u00xx`, lone
 * surrogates as `\udxxx`, everything else (a surrogate pair too) as its UTF-8.
 */
function writeEscaped(src: Uint8Array, from: number, to: number, out: Uint8Array, at: number): number {
  let o = at;
  out[o++] = QUOTE;
  const last = to - 1;
  let i = from + 1;
  while (i < last) {
    const c = src[i] as number;
    if (c !== BACKSLASH) {
      out[o++] = c;
      i++;
      continue;
    }
    const e = src[i + 1] as number;
    if (e !== 0x75) {
      if (e === 0x2f) {
        out[o++] = 0x2f; // `\/` is `/`
      } else {
        out[o++] = BACKSLASH;
        out[o++] = e; // \" \\ \b \f \n \r \t are written as they are
      }
      i += 2;
      continue;
    }
    let unit = unitAt(src, i);
    i += 6;
    if (unit < 0x80) {
      if (unit < SPACE) {
        const short = SHORT_ESCAPE[unit] as number;
        if (short !== 0) {
          out[o++] = BACKSLASH;
          out[o++] = short;
        } else {
          o = writeUnicodeEscape(out, o, unit);
        }
      } else {
        if (unit === QUOTE || unit === BACKSLASH) out[o++] = BACKSLASH;
        out[o++] = unit;
      }
    } else if (unit < 0x800) {
      out[o++] = 0xc0 | (unit >> 6);
      out[o++] = 0x80 | (unit & 0x3f);
    } else if (unit < 0xd800 || unit > 0xdfff) {
      out[o++] = 0xe0 | (unit >> 12);
      out[o++] = 0x80 | ((unit >> 6) & 0x3f);
      out[o++] = 0x80 | (unit & 0x3f);
    } else {
      // A surrogate: a pair when a high one is followed by an escaped low one, else written escaped.
      let low = -1;
      if (unit <= 0xdbff && i + 5 < last && src[i] === BACKSLASH && src[i + 1] === 0x75) {
        low = unitAt(src, i);
        if (low < 0xdc00 || low > 0xdfff) low = -1;
      }
      if (low === -1) {
        o = writeUnicodeEscape(out, o, unit);
        continue;
      }
      i += 6;
      unit = 0x10000 + ((unit - 0xd800) << 10) + (low - 0xdc00);
      out[o++] = 0xf0 | (unit >> 18);
      out[o++] = 0x80 | ((unit >> 12) & 0x3f);
      out[o++] = 0x80 | ((unit >> 6) & 0x3f);
      out[o++] = 0x80 | (unit & 0x3f);
    }
  }
  out[o++] = QUOTE;
  return o;
}

function copy(src: Uint8Array, from: number, to: number, out: Uint8Array, at: number): number {
  if (to - from > 64) {
    out.set(src.subarray(from, to), at);
    return at + (to - from);
  }
  let o = at;
  for (let k = from; k < to; k++) out[o++] = src[k] as number;
  return o;
}

/** `"name":` of the member node `member`. */
function writeName(src: Uint8Array, t: Int32Array, member: number, out: Uint8Array, at: number): number {
  out[at] = QUOTE;
  const o = copy(src, t[member + 1] as number, t[member + 2] as number, out, at + 1);
  out[o] = QUOTE;
  out[o + 1] = COLON;
  return o + 2;
}

/** Pass 2: the tape read from `src` as canonical JSON into `out` from `at`; returns where it ends. */
function write(src: Uint8Array, out: Uint8Array, at: number): number {
  const t = tape;
  const sorted = order;
  let o = at;
  let node = 0;
  let depth = 0;
  for (;;) {
    const kind = t[node] as number;
    if (kind === RAW) {
      o = copy(src, t[node + 1] as number, t[node + 2] as number, out, o);
    } else if (kind === ESCAPED) {
      o = writeEscaped(src, t[node + 1] as number, t[node + 2] as number, out, o);
    } else if (kind === ARRAY) {
      out[o++] = OPEN_BRACKET;
      const end = t[node + 3] as number;
      if (end === node + 4) {
        out[o++] = CLOSE_BRACKET;
      } else {
        // The first item now; frameBase holds where the next one starts.
        frameNode[depth] = ARRAY;
        frameBase[depth] = t[node + 7] as number;
        frameEnd[depth] = end;
        depth++;
        node += 4;
        continue;
      }
    } else {
      out[o++] = OPEN_BRACE;
      const from = t[node + 1] as number;
      const count = t[node + 2] as number;
      if (count === 0) {
        out[o++] = CLOSE_BRACE;
      } else {
        frameNode[depth] = OBJECT;
        frameBase[depth] = from + 1;
        frameEnd[depth] = from + count;
        depth++;
        const member = sorted[from] as number;
        o = writeName(src, t, member, out, o);
        node = member + 4;
        continue;
      }
    }
    // A value is written: the next one of its container, or close it.
    for (;;) {
      if (depth === 0) return o;
      const frame = depth - 1;
      const next = frameBase[frame] as number;
      if (frameNode[frame] === ARRAY) {
        if (next === frameEnd[frame]) {
          out[o++] = CLOSE_BRACKET;
          depth--;
          continue;
        }
        out[o++] = COMMA;
        node = next;
        frameBase[frame] = t[next + 3] as number;
        break;
      }
      if (next === frameEnd[frame]) {
        out[o++] = CLOSE_BRACE;
        depth--;
        continue;
      }
      out[o++] = COMMA;
      const member = sorted[next] as number;
      frameBase[frame] = next + 1;
      o = writeName(src, t, member, out, o);
      node = member + 4;
      break;
    }
  }
}

/**
 * The canonical form of the JSON text `src[0, end)` (UTF-8), written into `out` from `at`, which must have
 * room for `end` more bytes (the canonical form is never longer than the text). Returns where it ends, or
 * {@link NOT_JSON} or {@link NEEDS_TEXT}. `excluded` holds dotted member paths to leave out, as for
 * {@link exactCanonicalJson}.
 */
export function exactCanonicalJsonBytes(
  src: Uint8Array,
  end: number,
  out: Uint8Array,
  at: number,
  excluded?: ReadonlySet<string>,
): number {
  const result = read(src, end, excluded);
  const written = result === 0 ? write(src, out, at) : result;
  if (tape.length > KEEP_INTS) tape = new Int32Array(1_024);
  if (members.length > KEEP_INTS) members = new Int32Array(256);
  if (order.length > KEEP_INTS) order = new Int32Array(256);
  if (excluded !== undefined) framePath.length = 0;
  return written;
}
