import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import type { IdempotencyStore } from '@idem/core';
import { createSqlStore } from '@idem/store-sql';
import Database from 'better-sqlite3';
import { drizzle } from 'drizzle-orm/better-sqlite3';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { EscapeError, escapeValue, readValue, shownValue } from '../src/escape.js';
import { run } from '../src/program.js';

// What `idem` shows of a scope or key (list, inspect, its messages) is what it reads back from `--scope` and
// `--key`: one escaping, the backslash escaped too, so that every string has one shown form and reads back whole.

// A control character (C0, DEL, C1, bidi override or isolate) anywhere in the text.
// biome-ignore lint/suspicious/noControlCharactersInRegex: the characters that must not be there.
const CONTROL = /[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/;

/** Scopes and keys as they can be stored, and the form `idem` shows each in. */
const MATRIX: readonly (readonly [what: string, stored: string, shown: string])[] = [
  ['empty', '', "''"],
  ['plain', 'tenant-42', 'tenant-42'],
  ['with a space', 'tenant 42', 'tenant 42'],
  ['starting with a space', ' tenant', ' tenant'],
  ["the reference catalog's, without a prefix", '\u001fanonymous', '\\x1fanonymous'],
  [
    "the reference catalog's, a prefix and a principal with a backslash",
    'eu\u001fCORP\\alice',
    'eu\\x1fCORP\\\\alice',
  ],
  ['C0 controls', 'a\u0001b\u0007c\u001b[2J', 'a\\x01b\\x07c\\x1b[2J'],
  ['line breaks and a tab', 'a\r\nb\tc', 'a\\r\\nb\\tc'],
  ['DEL and a C1 CSI', 'a\u007fb\u009b2J', 'a\\x7fb\\x9b2J'],
  ['bidi overrides and isolates', '\u202eevil\u2066', '\\u202eevil\\u2066'],
  ['a backslash', '\\', '\\\\'],
  ['two backslashes', '\\\\', '\\\\\\\\'],
  ['a backslash at the end', 'tenant\\', 'tenant\\\\'],
  ['a domain principal', 'CORP\\alice', 'CORP\\\\alice'],
  ['the text \\x1f, not the character', '\\x1fanonymous', '\\\\x1fanonymous'],
  ['the text \\u202e and \\n', '\\u202e\\n', '\\\\u202e\\\\n'],
  ['the text \\x1f next to the character', '\\x1f\u001f', '\\\\x1f\\x1f'],
  ['the two characters of an empty scope', "''", '\\x27\\x27'],
  ['one quote', "o'brien", "o'brien"],
  ['double quotes', '"quoted"', '"quoted"'],
  ['CJK', '租户-42', '租户-42'],
  ['a combining mark', 'te\u0301nant', 'te\u0301nant'],
  ['an emoji', '🧾-2', '🧾-2'],
];

/** Values no SQL store holds (refused as a limit), shown all the same. */
const UNSTORABLE: typeof MATRIX = [
  ['NUL', 'a\u0000b', 'a\\x00b'],
  ['a lone surrogate', 'a\ud800b', 'a\ud800b'],
];

describe('the shown form of a scope or key', () => {
  test.each([...MATRIX, ...UNSTORABLE])(
    '%s: is shown as one inert line and reads back whole',
    (_, stored, shown) => {
      expect(shownValue(stored)).toBe(shown);
      expect(shown).not.toMatch(CONTROL);
      expect(shown).not.toContain('\n');
      expect(readValue(shown)).toBe(stored);
    },
  );

  test('no two strings share a shown form: random strings of escapes, look-alikes and controls', () => {
    const alphabet = ['\\', '\\', 'x', 'u', '1', 'f', '0', '2', 'e', 'n', 'r', 't', "'", '"', ' ', 'é', '🧾'];
    alphabet.push('\u0000', '\u001f', '\n', '\r', '\t', '\u007f', '\u009b', '\u202e', '\u2069');
    let seed = 20_261_201;
    const next = () => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      return seed;
    };
    const seen = new Map<string, string>();
    for (let i = 0; i < 5000; i++) {
      let text = '';
      for (let length = next() % 9; length > 0; length--) text += alphabet[next() % alphabet.length];
      const shown = shownValue(text);
      expect(shown).not.toMatch(CONTROL);
      expect(readValue(shown)).toBe(text);
      const other = seen.get(shown);
      if (other !== undefined) expect(other).toBe(text);
      seen.set(shown, text);
    }
  });

  test('a control character given as itself is taken as it is', () => {
    expect(readValue('\u001fanonymous')).toBe('\u001fanonymous');
    expect(readValue('a\u001b[2J\nb')).toBe('a\u001b[2J\nb');
  });

  test('escapes are read in either case of hex digit', () => {
    expect(readValue('\\x1F\\u202E')).toBe('\u001f\u202e');
  });

  test.each([
    ['a backslash before a letter that is no escape', 'CORP\\alice', 5],
    ['a backslash at the end', 'tenant\\', 7],
    ['\\x with one hex digit', '\\x1', 1],
    ['\\x with no hex digit', 'a\\xzz', 2],
    ['\\u with three hex digits', '\\u202', 1],
    ['\\u with braces', '\\u{1f}', 1],
    ['a backslash before a control character', 'a\\\u001b', 2],
    ['a backslash after an emoji, counted as one character', '🧾\\q', 2],
  ])('%s is refused, by where it is', (_, text, at) => {
    expect(() => readValue(text)).toThrow(EscapeError);
    try {
      readValue(text);
    } catch (error) {
      expect((error as EscapeError).at).toBe(at);
      expect((error as Error).message).toMatch(/write a backslash itself as \\\\/);
    }
  });

  test('a header, fingerprint or owner is escaped the same way', () => {
    expect(escapeValue('x-note: a\\b\u001b[K')).toBe('x-note: a\\\\b\\x1b[K');
    expect(escapeValue('')).toBe('');
  });
});

/** A terminal-less stream that keeps what is written. */
function sink() {
  const stream = Object.assign(new PassThrough(), { isTTY: false });
  let text = '';
  stream.on('data', (chunk: Buffer) => {
    text += chunk.toString('utf8');
  });
  return { stream, text: () => text };
}

/** `idem` run in this process, as a script would: no terminal. */
async function idem(...argv: string[]) {
  const stdout = sink();
  const stderr = sink();
  const stdin = Object.assign(new PassThrough(), { isTTY: false });
  const code = await run(argv, { stdout: stdout.stream, stderr: stderr.stream, stdin, env: {} });
  return { code, stdout: stdout.text(), stderr: stderr.text() };
}

/** The `KEY` cell of a `list` row (its state and scope in ASCII: the key starts where its header does). */
const listedKey = (header: string, row: string): string =>
  row.slice(header.indexOf('KEY'), row.search(/ {2}200 {2}/)).trimEnd();

describe('what idem shows is what it finds again (a SQLite file)', () => {
  let dir: string;
  let url: string;
  let connection: Database.Database;
  let store: IdempotencyStore;

  async function complete(scope: string, key: string) {
    const now = Date.now();
    const ref = { scope, key, owner: 'owner-1' };
    await store.reserve({
      ...ref,
      fingerprint: 'f'.repeat(64),
      nowMs: now - 1000,
      leaseUntilMs: now + 30_000,
      expiresAtMs: now + 3_600_000,
    });
    const response = { status: 200, headers: {}, body: null };
    expect(await store.finalize({ ...ref, nowMs: now, response })).toBe(true);
  }

  // Each matrix entry as a scope (with a key of its own) and, but the empty one, as a key (in the scope `keys`).
  const scopeKey = (i: number) => `scope-key-${String(i).padStart(2, '0')}`;
  const KEYS_SCOPE = 'keys';

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'idem-cli-round-trip-'));
    url = `sqlite:${join(dir, 'records.db')}`;
    expect((await idem('migrate', url)).code).toBe(0);
    connection = new Database(join(dir, 'records.db'), { fileMustExist: true });
    store = createSqlStore(drizzle(connection), { dialect: 'sqlite' });
    for (const [i, [, stored]] of MATRIX.entries()) {
      await complete(stored, scopeKey(i));
      if (stored !== '') await complete(KEYS_SCOPE, stored);
    }
  });
  afterAll(() => {
    connection?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  describe.each(MATRIX.map(([what, stored, shown], i) => ({ what, stored, shown, i })))(
    'a scope $what',
    ({ stored, shown, i }) => {
      const key = scopeKey(i);

      test('is shown by list as its shown form, which inspect, stats and list --scope find again', async () => {
        const listed = await idem('list', url, '--limit', '1000');
        expect(listed.code, listed.stderr).toBe(0);
        for (const line of listed.stdout.split('\n')) expect(line).not.toMatch(CONTROL);
        const row = listed.stdout.split('\n').find((line) => line.includes(`  ${key}  `)) ?? '';
        const cell = row.slice('completed  '.length, row.indexOf(`  ${key}  `)).trimEnd();
        expect(cell).toBe(shown);

        const inspected = await idem('inspect', url, '--scope', cell, '--key', key, '--json');
        expect(inspected.code, inspected.stderr).toBe(0);
        expect(JSON.parse(inspected.stdout).record.scope).toBe(stored);
        const counted = await idem('stats', url, '--scope', cell, '--json');
        expect(JSON.parse(counted.stdout).completed).toBe(1);
        const only = await idem('list', url, '--scope', cell, '--json');
        expect(JSON.parse(only.stdout).records.map((r: { key: string }) => r.key)).toEqual([key]);
      });

      test('is shown by inspect and in its messages as that same form', async () => {
        const inspected = await idem('inspect', url, '--scope', shown, '--key', key);
        expect(inspected.code, inspected.stderr).toBe(0);
        const field = /^scope {8}(.*)$/m.exec(inspected.stdout)?.[1] ?? '';
        expect(field.replace(/ \(the default scope\)$/, '')).toBe(shown);

        const missing = await idem('inspect', url, '--scope', shown, '--key', 'no-such-key');
        expect(missing.code).toBe(3);
        expect(missing.stderr.trimEnd()).not.toMatch(CONTROL);
        expect(missing.stderr.trimEnd().split('\n')).toHaveLength(1);
        if (stored === '') expect(missing.stderr).toBe('no record for key no-such-key\n');
        else expect(missing.stderr).toBe(`no record for key no-such-key in scope "${shown}"\n`);
        // --json names it as stored.
        const json = await idem('inspect', url, '--scope', shown, '--key', 'no-such-key', '--json');
        expect(JSON.parse(json.stdout)).toEqual({ found: false, scope: stored, key: 'no-such-key' });
      });

      // Given raw, a backslash would start an escape, and `''` is the empty scope: those only in their shown form.
      if (stored !== '' && stored !== "''" && !stored.includes('\\'))
        test('is found given as itself too, control characters and all', async () => {
          const inspected = await idem('inspect', url, '--scope', stored, '--key', key, '--json');
          expect(inspected.code, inspected.stderr).toBe(0);
          expect(JSON.parse(inspected.stdout).record.scope).toBe(stored);
        });

      if (stored !== '')
        test('as a key: shown by list and inspect in that form, which inspect and forget find again', async () => {
          const listed = await idem('list', url, '--scope', KEYS_SCOPE, '--limit', '1000');
          const [header = '', ...rows] = listed.stdout.trimEnd().split('\n');
          const cells = rows.map((row) => listedKey(header, row));
          expect(cells).toContain(shown);

          const inspected = await idem('inspect', url, '--scope', KEYS_SCOPE, '--key', shown);
          expect(inspected.code, inspected.stderr).toBe(0);
          expect(/^key {10}(.*)$/m.exec(inspected.stdout)?.[1]).toBe(shown);
          const json = await idem('inspect', url, '--scope', KEYS_SCOPE, '--key', shown, '--json');
          expect(JSON.parse(json.stdout).record.key).toBe(stored);

          const forgotten = await idem('forget', url, '--scope', KEYS_SCOPE, '--key', shown, '--yes');
          expect(forgotten.code, forgotten.stderr).toBe(0);
          expect(forgotten.stdout).toBe(`forgot the completed record of key ${shown} in scope "keys"\n`);
          expect(await store.load({ scope: KEYS_SCOPE, key: stored })).toBeUndefined();
        });
    },
  );

  test('a scope or key that cannot be read is a usage error before the store is reached', async () => {
    const unreachable = 'postgres://u@127.0.0.1:1/db';
    for (const args of [
      ['inspect', unreachable, '--scope', 'CORP\\alice', '--key', 'k'],
      ['forget', unreachable, '--key', 'order\\1', '--yes'],
      ['list', unreachable, '--scope', '\\x1'],
      ['stats', unreachable, '--scope', 'a\\\u001b[2J'],
    ]) {
      const ran = await idem(...args);
      expect(ran.code, ran.stderr).toBe(2);
      expect(ran.stderr).toMatch(/^idem: --(scope|key): the backslash at character \d+ starts no escape/);
      expect(ran.stderr).toMatch(/write a backslash itself as \\\\\n$/);
      expect(ran.stderr.trimEnd()).not.toMatch(CONTROL);
      expect(ran.stderr).not.toMatch(/connection refused/);
    }
  });
});
