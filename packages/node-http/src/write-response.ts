import type { ServerResponse } from 'node:http';

/**
 * A response known whole before it is written: a replay (`ReplayResponse`, its headers with
 * `idempotent-replayed: true`) or the coordinator's own answer ({@link errorResponse}).
 */
export interface WholeResponse {
  readonly status: number;
  /** Lower-case names. */
  readonly headers: Readonly<Record<string, string>>;
  /** `null` when there is none (a replay whose body was not stored). */
  readonly body: string | Uint8Array | null;
}

/**
 * Write a whole response to a Node.js response: status, headers, body, end. For a replay nothing else runs:
 * the handler already did.
 *
 * @example
 * if (result.action === 'replay') writeResponse(res, result.response);
 */
export function writeResponse(res: ServerResponse, response: WholeResponse): void {
  res.statusCode = response.status;
  for (const [name, value] of Object.entries(response.headers)) res.setHeader(name, value);
  res.end(response.body ?? undefined);
}
