import { type Idempotency, type IdempotentRequest, UNSEEN_BODY } from '@idem/core';

/** A request as a Web adapter has it: what {@link describeWebRequest} turns into what `begin` needs. */
export interface WebRequestParts<Host> {
  /** The route template (`/orders/:id`), or the path where there is no router. */
  readonly route: string;
  /**
   * The body ({@link readBody}): its raw bytes, or what a framework kept of it once they were gone (the text
   * as received, a `Blob`, a `FormData`, the parsed value); `UNSEEN_BODY` when it could not be read whole;
   * `undefined` when there is none or no key was sent.
   */
  readonly body: unknown;
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
 * needs no body then. `read` may answer what a framework kept of a body whose bytes are gone instead (`Kept`:
 * the text as received, a `Blob`, a `FormData`, the parsed value, or `UNSEEN_BODY` when it kept nothing that
 * can be hashed), which is passed on as it is. A body that cannot be read whole (its stream fails midway, it
 * was read already) is `UNSEEN_BODY`, which `begin` answers with 415 `IDEMPOTENCY_BODY_UNSEEN` before reserving
 * anything, as `@idem/node-http` does for the Node.js adapters.
 */
export async function readBody<Kept = never>(
  idem: Pick<Idempotency, 'headerName' | 'covers'>,
  request: Request,
  read: () => Promise<ArrayBuffer | Kept>,
): Promise<Uint8Array | Kept | typeof UNSEEN_BODY | undefined> {
  const { headers } = request;
  if (!idem.covers(request.method) || !headers.has(idem.headerName) || !hasBody(request)) return undefined;
  let body: ArrayBuffer | Kept;
  try {
    body = await read();
  } catch {
    return UNSEEN_BODY; // nothing could read it whole: there are no bytes to bind the key to
  }
  return body instanceof ArrayBuffer ? new Uint8Array(body) : body;
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
