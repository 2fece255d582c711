import type { IdemError } from './errors.js';
import { copyHeaders } from './response.js';

/** A host's `formatError` option: the JSON value of the answer to `error`, given the framework's request. */
export type FormatError<Host> = (error: IdemError, host: Host) => unknown;

/**
 * A response known whole before it is written: a replay (`ReplayResponse`, its headers with
 * `idempotent-replayed: true`) or the coordinator's own answer ({@link errorResponse}). Every adapter writes
 * these the same way, in its framework's idiom.
 */
export interface WholeResponse {
  readonly status: number;
  /** Lower-case names. */
  readonly headers: Readonly<Record<string, string>>;
  /** `null` when there is none (a replay whose body was not stored). */
  readonly body: string | Uint8Array | null;
}

/**
 * The coordinator's answer to `error` (400, 409, 415, 422, 503) as a response: its status, the headers it
 * needs (`retry-after`) with a JSON content type, and its body, the host's `formatError(error, host)`. The
 * default body `{ error: { code, message } }` (`error.toJSON()`) stands in when there is no `formatError`,
 * when it throws, or when what it returns cannot be written as JSON (a BigInt, a cycle, `undefined`): a broken
 * formatter never turns a 409 into a crash. It is a {@link WholeResponse}, for the adapter's writer.
 *
 * @param host the framework's request, handed to `formatError`
 * @example
 * writeResponse(res, errorResponse(result.error, req, options.formatError));
 */
export function errorResponse<Host>(
  error: IdemError,
  host: Host,
  formatError?: FormatError<Host> | undefined,
): { readonly status: number; readonly headers: Readonly<Record<string, string>>; readonly body: string } {
  const headers = copyHeaders(error.headers);
  headers['content-type'] = 'application/json; charset=utf-8';
  return { status: error.status, headers, body: formatted(error, host, formatError) };
}

function formatted<Host>(error: IdemError, host: Host, formatError: FormatError<Host> | undefined): string {
  if (formatError !== undefined) {
    try {
      const text = JSON.stringify(formatError(error, host));
      if (text !== undefined) return text;
    } catch {
      // the default body below
    }
  }
  return JSON.stringify(error.toJSON());
}
