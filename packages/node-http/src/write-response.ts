import type { ServerResponse } from 'node:http';
import type { WholeResponse } from '@idem/core';
import type { HeaderSource } from './settle-handed-over.js';

/** Headers that say how the body's bytes are framed and encoded: only the answer written may set them. */
const FRAMING = new Set(['content-length', 'content-encoding', 'transfer-encoding']);

/**
 * Write a whole response to a Node.js response: status, headers, body, end. For a replay nothing else runs:
 * the handler already did.
 *
 * `held`: headers the framework holds for `res` without having set them on it yet (Fastify's `reply`, whose
 * headers go out with its own `writeHead`), such as those an app's earlier hooks set for every request (CORS):
 * they go out too, but for those that frame the body (`Content-Length`, `Content-Encoding`,
 * `Transfer-Encoding`), and the response's own headers win over them.
 *
 * @example
 * if (result.action === 'replay') writeResponse(res, result.response);
 */
export function writeResponse(res: ServerResponse, response: WholeResponse, held?: HeaderSource): void {
  if (held !== undefined) {
    const headers = held.getHeaders();
    for (const name in headers) {
      const value = headers[name];
      if (value !== undefined && !FRAMING.has(name.toLowerCase())) res.setHeader(name, value);
    }
  }
  res.statusCode = response.status;
  for (const [name, value] of Object.entries(response.headers)) res.setHeader(name, value);
  res.end(response.body ?? undefined);
}
