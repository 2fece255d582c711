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

/** A framework's reply, as Fastify's: status, headers and body set by chained calls. */
export interface ChainedReply<Reply> {
  code(status: number): Reply;
  headers(headers: Readonly<Record<string, string>>): Reply;
  send(body?: string | Uint8Array): Reply;
}

/**
 * Write a whole response through a framework's reply (Fastify's `reply`): what {@link writeResponse} does for a
 * Node.js response, with the framework's own hooks (`onSend`, compression) still run.
 *
 * @example
 * if (result.action === 'replay') return replyWith(reply, result.response);
 */
export function replyWith<Reply extends ChainedReply<Reply>>(reply: Reply, response: WholeResponse): Reply {
  // No body: a framework may serialize `null`.
  return reply
    .code(response.status)
    .headers(response.headers)
    .send(response.body ?? undefined);
}
