/** The label value of everything past a bound: unknown routes and methods collapse into it. */
export const OTHER = 'other';

/** The label value when there is none: no status seen (a client gone before one, a failed store call). */
export const NONE = 'none';

const METHOD = /^[A-Z]{1,16}$/;
const LABEL_MAX_CHARS = 200;
// biome-ignore lint/suspicious/noControlCharactersInRegex: these are the characters replaced.
const CONTROL = /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/g;

/** Methods seen, as labels: the few every server answers, bounded (a client may send any word). */
const methods = new Map<string, string>();
const MAX_METHODS = 64;

/** An HTTP method as a label: upper-case letters only, else `other`. */
export function methodLabel(method: string | undefined): string {
  if (method === undefined) return NONE;
  const known = methods.get(method);
  if (known !== undefined) return known;
  const upper = method.toUpperCase();
  const label = METHOD.test(upper) ? upper : OTHER;
  if (methods.size < MAX_METHODS) methods.set(method, label);
  return label;
}

/** Every status label, made once: `STATUSES[status - 100]`. */
const STATUSES = Array.from({ length: 500 }, (_, index) => String(index + 100));

/** A status as a label: an integer 100–599, else `none`. */
export function statusLabel(status: number | undefined): string {
  return status !== undefined && Number.isInteger(status) && status >= 100 && status <= 599
    ? (STATUSES[status - 100] as string)
    : NONE;
}

/**
 * Keeps a label's distinct values bounded: the first `max` values seen are kept (control characters replaced,
 * at most 200 characters), every later new value is `other`. Route templates come from the host's own routes,
 * so the bound only bites when something passes raw paths.
 */
export class BoundedLabel {
  readonly #max: number;
  readonly #seen = new Map<string, string>();

  constructor(max: number) {
    this.#max = max;
  }

  of(value: string): string {
    const known = this.#seen.get(value);
    if (known !== undefined) return known;
    if (this.#seen.size >= this.#max) return OTHER;
    const clean = value.replace(CONTROL, '?').slice(0, LABEL_MAX_CHARS);
    this.#seen.set(value, clean);
    return clean;
  }
}
