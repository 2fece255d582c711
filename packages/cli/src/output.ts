import pc from 'picocolors';
import stringWidth from 'string-width';
import { escapeValue } from './escape.js';

/** Where the command writes, and what kind of reader is on the other end. */
export interface Io {
  readonly stdout: NodeJS.WritableStream & { isTTY?: boolean };
  readonly stderr: NodeJS.WritableStream & { isTTY?: boolean };
  readonly stdin: NodeJS.ReadableStream & { isTTY?: boolean };
  readonly env: NodeJS.ProcessEnv;
}

/** Colours for a terminal only: never for a pipe, `NO_COLOR`, `--no-color` (`refused`) or `TERM=dumb`. */
export function colorsFor(io: Io, stream: 'stdout' | 'stderr', refused = false) {
  const { env } = io;
  const wanted = refused
    ? false
    : env.FORCE_COLOR !== undefined && env.FORCE_COLOR !== '0'
      ? true
      : io[stream].isTTY === true && env.NO_COLOR === undefined && env.TERM !== 'dumb';
  return pc.createColors(wanted);
}

export type Colors = ReturnType<typeof colorsFor>;

const UNITS: readonly [string, number][] = [
  ['d', 86_400_000],
  ['h', 3_600_000],
  ['min', 60_000],
  ['s', 1000],
];

/** A duration in its largest unit and the next one: `2 h 14 min`, `1 d`, `45 s`, `380 ms`. */
export function humanDuration(ms: number): string {
  const abs = Math.abs(ms);
  if (abs < 1000) return `${Math.round(abs)} ms`;
  const first = UNITS.findIndex(([, size]) => abs >= size);
  const [unit, size] = UNITS[first] as [string, number];
  const whole = Math.floor(abs / size);
  const next = UNITS[first + 1];
  const rest = next === undefined ? 0 : Math.floor((abs - whole * size) / next[1]);
  return rest === 0 || next === undefined ? `${whole} ${unit}` : `${whole} ${unit} ${rest} ${next[0]}`;
}

/** An instant as ISO-8601 UTC and how far from now: `2026-12-01T20:01:02.123Z (3 min ago)`. */
export function humanTime(ms: number, nowMs: number): string {
  const relative = ms <= nowMs ? `${humanDuration(nowMs - ms)} ago` : `in ${humanDuration(ms - nowMs)}`;
  return `${new Date(ms).toISOString()} (${relative})`;
}

/** Bytes as `230 B`, `1.2 KiB`, `8.0 MiB`. */
export function humanBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KiB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
}

export const count = (n: number): string => n.toLocaleString('en-US');

// What a stored body could rewrite the operator's terminal with (clear it, retitle it, plant a link, move the
// cursor back over a line) or hide text behind: C0 controls but its own line breaks and tabs, DEL, C1 controls
// (U+009B is a CSI by itself) and the bidi overrides. A scope, key or header is escaped whole instead
// (escape.ts): those are one line, and the operator gives a scope or key back.
const CONTROL_IN_LINES =
  // biome-ignore lint/suspicious/noControlCharactersInRegex: these are the characters escaped.
  /\r(?!\n)|[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g;

/**
 * A stored body as inert text for a terminal: its line breaks, tabs and backslashes as they are (a JSON body
 * stays readable), every other control character written as {@link escapeValue} writes it (`\x1b`, `\r`,
 * `\u202e`). `--json` shows it exactly instead.
 */
export const inertBody = (text: string): string =>
  text.replace(CONTROL_IN_LINES, (char) => escapeValue(char));

/** `label  value` lines, the labels padded to one width. */
export function fields(rows: readonly (readonly [string, string])[], colors: Colors): string {
  const width = Math.max(...rows.map(([label]) => label.length));
  return rows
    .map(([label, value]) => {
      const [first = '', ...more] = value.split('\n');
      const pad = ' '.repeat(width + 2);
      return [`${colors.dim(label.padEnd(width))}  ${first}`, ...more.map((line) => `${pad}${line}`)].join(
        '\n',
      );
    })
    .join('\n');
}

/** The columns `text` takes on a terminal: colours take none, wide characters and emoji two, combining marks none. */
export const visibleWidth = (text: string): number => stringWidth(text);

/**
 * Rows under a dim header, columns aligned by two spaces, each line without trailing blanks. In one pass (no
 * table library: cli-table3 lays each cell out against every row above it, and 10,000 rows took 25 s).
 */
export function table(head: readonly string[], rows: readonly (readonly string[])[], colors: Colors): string {
  const lines = [head.map((title) => colors.dim(title)), ...rows].map((row) =>
    row.map((cell) => ({ cell, width: visibleWidth(cell) })),
  );
  const widths = head.map((_, column) =>
    lines.reduce((widest, line) => Math.max(widest, line[column]?.width ?? 0), 0),
  );
  return lines
    .map((line) =>
      line
        .map(({ cell, width }, column) => `${cell}${' '.repeat((widths[column] ?? 0) - width)}`)
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

/** Colour a record state the same way everywhere. */
export function stateText(state: 'in-flight' | 'completed' | 'expired', colors: Colors): string {
  if (state === 'in-flight') return colors.yellow(state);
  if (state === 'completed') return colors.green(state);
  return colors.dim(state);
}
