import type { WholeResponse } from '@idem/core';

type ResponseBody = ConstructorParameters<typeof Response>[0];

/** Statuses whose response has no body by definition: a `Response` with one cannot be made. */
const NULL_BODY = new Set([101, 103, 204, 205, 304]);

/**
 * A whole answer (a replay, or `errorResponse`'s answer to a refusal) as a Web `Response`: its status, headers
 * and body. For a replay nothing else runs: the handler already did.
 *
 * @example
 * if (result.action === 'replay') return responseOf(result.response);
 */
export function responseOf(answer: WholeResponse): Response {
  const body = NULL_BODY.has(answer.status) ? null : answer.body;
  // A body without a content type gets its headers as `Headers`, which a server treats as it treated the
  // handler's (`@hono/node-server` gives it its default content type then, as it did the first answer, but not
  // when the headers are a plain object); a plain object is cheaper where that cannot matter.
  const { headers } = answer;
  const typed = body === null || headers['content-type'] !== undefined;
  return new Response(body as ResponseBody, {
    status: answer.status,
    headers: typed ? headers : new Headers(headers),
  });
}
