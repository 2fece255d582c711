/**
 * Canonical JSON straight from a JSON text, for the request fingerprint: object members sorted by name (code
 * unit order; a repeated name keeps its last value, as `JSON.parse` does), insignificant whitespace dropped,
 * strings re-escaped the one way `JSON.stringify` writes them, and numbers kept exactly as written. Parsing
 * to JavaScript values first would lose what doubles cannot hold: `1e400` and `null` would read alike, and
 * so would `12345678901234567890` and `12345678901234567891`. `__proto__` is an ordinary name here.
 *
 * Iterative, linear in the text (plus sorting); each value's text is built by concatenation, which the engine
 * keeps as a rope until the hash reads it.
 */

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

/** Deeper documents are not canonicalized: the caller hashes their raw bytes instead, which is exact too. */
export const MAX_DEPTH = 1_000;

const NUMBER = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;
// biome-ignore lint/suspicious/noControlCharactersInRegex: JSON strings must not hold exactly these raw.
const CONTROL = /[\u0000-\u001f]/;

/** A member of an object being read: its name, decoded and as canonical text, and its value's text. */
type Member = [name: string, nameText: string, valueText: string];

interface ObjectFrame {
  readonly members: Member[];
  readonly path: string;
  /** The member whose value is being read. */
  name: string;
  nameText: string;
  /** `true` when that member is excluded from the fingerprint. */
  skip: boolean;
}

interface ArrayFrame {
  /** The array's text so far, without the closing bracket; built by concatenation (a rope), never joined. */
  text: string;
  readonly path: string;
}

type Frame = ObjectFrame | ArrayFrame;

function skipSpace(text: string, at: number): number {
  let i = at;
  for (;;) {
    const c = text.charCodeAt(i);
    if (c !== SPACE && c !== LINE_FEED && c !== RETURN && c !== TAB) return i;
    i++;
  }
}

/**
 * Where the string token read last by {@link readString} ended, and its decoded value when it had escapes
 * (undefined when the value is the text between its quotes).
 */
let stringEnd = 0;
let stringValue: string | undefined;

/**
 * A string token starting at `at` (its opening quote), as canonical text; undefined when it is not one. Its
 * end (and its decoded value, if it had escapes) are left in {@link stringEnd} and {@link stringValue}: no
 * object per string, the most frequent token of a request body.
 */
function readString(text: string, at: number): string | undefined {
  let from = at + 1;
  for (;;) {
    const close = text.indexOf('"', from);
    if (close === -1) return undefined;
    let backslashes = 0;
    while (text.charCodeAt(close - 1 - backslashes) === BACKSLASH) backslashes++;
    if (backslashes % 2 === 1) {
      from = close + 1;
      continue;
    }
    const token = text.slice(at, close + 1);
    if (CONTROL.test(token)) return undefined;
    stringEnd = close + 1;
    if (!token.includes('\\')) {
      stringValue = undefined;
      return token;
    }
    try {
      stringValue = JSON.parse(token) as string;
      return JSON.stringify(stringValue);
    } catch {
      return undefined; // an invalid escape
    }
  }
}

/** Members sorted by name in place (stable): an insertion sort, which allocates nothing, for the few of most objects. */
function sortMembers(members: Member[]): void {
  if (members.length > 24) {
    members.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
    return;
  }
  for (let m = 1; m < members.length; m++) {
    const member = members[m] as Member;
    const name = member[0];
    let at = m - 1;
    while (at >= 0 && (members[at] as Member)[0] > name) {
      members[at + 1] = members[at] as Member;
      at--;
    }
    members[at + 1] = member;
  }
}

/** `{…}` from the members read, sorted by name; of a repeated name, the last one counts. */
function closeObject(members: Member[]): string {
  sortMembers(members);
  let text = '{';
  for (let m = 0; m < members.length; m++) {
    const member = members[m] as Member;
    if (m + 1 < members.length && (members[m + 1] as Member)[0] === member[0]) continue;
    if (text.length > 1) text += ',';
    text += `${member[1]}:${member[2]}`;
  }
  return `${text}}`;
}

/**
 * The canonical form of a JSON text, or undefined when the text is not exactly one JSON value (or nests
 * deeper than {@link MAX_DEPTH}). `excluded` holds dotted member paths to leave out (array elements share
 * their array's path).
 */
export function exactCanonicalJson(text: string, excluded?: ReadonlySet<string>): string | undefined {
  const stack: Frame[] = [];
  let i = 0;
  let path = '';

  /** Read `"name":` at `i` into the frame; false when the text does not hold one there. */
  const readName = (frame: ObjectFrame): boolean => {
    if (text.charCodeAt(i) !== QUOTE) return false;
    const nameText = readString(text, i);
    if (nameText === undefined) return false;
    const name = stringValue ?? text.slice(i + 1, stringEnd - 1);
    i = skipSpace(text, stringEnd);
    if (text.charCodeAt(i) !== COLON) return false;
    i++;
    frame.name = name;
    frame.nameText = nameText;
    path = excluded === undefined ? '' : frame.path === '' ? name : `${frame.path}.${name}`;
    frame.skip = excluded?.has(path) === true;
    return true;
  };

  for (;;) {
    // A value starts at i.
    i = skipSpace(text, i);
    const c = text.charCodeAt(i);
    let value: string;
    if (c === OPEN_BRACE || c === OPEN_BRACKET) {
      if (stack.length === MAX_DEPTH) return undefined;
      i = skipSpace(text, i + 1);
      if (c === OPEN_BRACE) {
        if (text.charCodeAt(i) === CLOSE_BRACE) {
          i++;
          value = '{}';
        } else {
          const frame: ObjectFrame = { members: [], path, name: '', nameText: '', skip: false };
          stack.push(frame);
          if (!readName(frame)) return undefined;
          continue;
        }
      } else if (text.charCodeAt(i) === CLOSE_BRACKET) {
        i++;
        value = '[]';
      } else {
        stack.push({ text: '[', path });
        continue;
      }
    } else if (c === QUOTE) {
      const string = readString(text, i);
      if (string === undefined) return undefined;
      i = stringEnd;
      value = string;
    } else if (c === MINUS || (c >= ZERO && c <= NINE)) {
      NUMBER.lastIndex = i;
      const match = NUMBER.exec(text);
      if (match === null) return undefined;
      value = match[0];
      i += value.length;
    } else if (text.startsWith('true', i)) {
      value = 'true';
      i += 4;
    } else if (text.startsWith('false', i)) {
      value = 'false';
      i += 5;
    } else if (text.startsWith('null', i)) {
      value = 'null';
      i += 4;
    } else {
      return undefined;
    }

    // A value is complete: hand it to its container, closing every container it completes.
    for (;;) {
      const frame = stack[stack.length - 1];
      i = skipSpace(text, i);
      if (frame === undefined) return i === text.length ? value : undefined;
      const next = text.charCodeAt(i);
      if ('members' in frame) {
        if (!frame.skip) frame.members.push([frame.name, frame.nameText, value]);
        if (next === COMMA) {
          i = skipSpace(text, i + 1);
          if (!readName(frame)) return undefined;
          break;
        }
        if (next !== CLOSE_BRACE) return undefined;
        value = closeObject(frame.members);
      } else {
        // Appending, not joining at the end: a join copies every item once per level of nesting, which a
        // large leaf under deep arrays turns into quadratic time.
        frame.text += frame.text.length === 1 ? value : `,${value}`;
        if (next === COMMA) {
          i++;
          path = frame.path;
          break;
        }
        if (next !== CLOSE_BRACKET) return undefined;
        value = `${frame.text}]`;
      }
      i++;
      stack.pop();
    }
  }
}
