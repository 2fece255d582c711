import type { Idempotency, IdempotentRequest } from '@idem/core';

/** A request as a Web adapter has it: what {@link describeWebRequest} turns into what `begin` needs. */
export interface WebRequestParts<Host> {
  /** The route template (`/orders/:id`), or the path where there is no router. */
  readonly route: string;
  /** The body's raw bytes ({@link readBody}), or `undefined` when there is none or no key was sent. */
  readonly body: Uint8Array | undefined;
  /** What the host's `scope` option returned. */
  readonly scope?: string | undefined;
  /** The host's request, handed to the hooks as `host`. */
  readonly host: Host;
}

/**
 * The path and the raw query of a request URL as received: split at the first `?` after the authority
 * (`/orders?` has an empty query, `/orders` none), without a fragment. No decoding or normalisation beyond what
 * the `Request` constructor did.
 */
export function pathAndQuery(url: string): { path: string; query: string | undefined } {
  const hash = url.indexOf('#');
  const href = hash === -1 ? url : url.slice(0, hash);
  const authority = href.indexOf('://');
  const after = authority === -1 ? 0 : authority + 3;
  const queryAt = href.indexOf('?', after);
  // The path starts at the first `/` after the authority, unless the query starts first (`https://a?b=/c`).
  const slash = href.indexOf('/', after);
  const start = slash === -1 || (queryAt !== -1 && queryAt < slash) ? -1 : slash;
  const path = start === -1 ? '/' : href.slice(start, queryAt === -1 ? href.length : queryAt);
  return { path, query: queryAt === -1 ? undefined : href.slice(queryAt + 1) };
}

/**
 * The request `begin` needs, from a Web `Request`: method, route, path and raw query, the body's bytes, the
 * content type, the key header as received (`Headers` joins a repeated header with `", "`, which `begin`
 * rejects: a comma is never valid in a key), the scope, and, where a request may wait behind another with
 * its key, the request's own `signal`, which the runtime aborts when the client leaves.
 *
 * @example
 * const result = await idem.begin(describeWebRequest(idem, request, { route, body, host: request }));
 */
export function describeWebRequest<Host>(
  idem: Pick<Idempotency, 'headerName' | 'waits'>,
  request: Request,
  parts: WebRequestParts<Host>,
): IdempotentRequest<Host> {
  const { path, query } = pathAndQuery(request.url);
  const { headers } = request;
  return {
    method: request.method,
    route: parts.route,
    path,
    query,
    body: parts.body,
    contentType: headers.get('content-type') ?? undefined,
    key: headers.get(idem.headerName) ?? undefined,
    scope: parts.scope,
    signal: idem.waits ? request.signal : undefined,
    host: parts.host,
  };
}

/**
 * The exact bytes of a keyed request's body, for the fingerprint, read through `read` (a framework's cached
 * reader such as Hono's `c.req.arrayBuffer()`, or a clone of the `Request`, so that the handler can still
 * read it); `undefined` when the method is not covered, no key is sent or the request has no body: `begin`
 * needs no body then.
 */
export async function readBody(
  idem: Pick<Idempotency, 'headerName' | 'covers'>,
  request: Request,
  read: () => Promise<ArrayBuffer>,
): Promise<Uint8Array | undefined> {
  const { headers } = request;
  if (!idem.covers(request.method) || !headers.has(idem.headerName) || !hasBody(request)) return undefined;
  return new Uint8Array(await read());
}

/**
 * `true` when the request has a body: by its `Content-Length` or `Transfer-Encoding` where it has one (asking
 * `request.body` makes some servers' lazy requests build a whole `Request`), else by `request.body`.
 */
function hasBody(request: Request): boolean {
  const length = request.headers.get('content-length');
  if (length !== null) return length !== '0';
  if (request.headers.has('transfer-encoding')) return true;
  return request.body !== null;
}
