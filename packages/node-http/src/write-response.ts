import type { ServerResponse } from 'node:http';
import type { WholeResponse } from '@idem/core';

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
