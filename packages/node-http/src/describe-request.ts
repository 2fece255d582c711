import type { IncomingHttpHeaders, ServerResponse } from 'node:http';
import { type Idempotency, type IdempotentRequest, UNSEEN_BODY } from '@idem/core';
import { clientGoneSignal } from './client-gone.js';

/** A request as a Node.js adapter has it: what {@link describeRequest} turns into what `begin` needs. */
export interface NodeRequestParts<Host> {
  /** The HTTP method. */
  readonly method: string;
  /** The URL as received, path and query (`req.originalUrl` in Express, `request.url` in Fastify). */
  readonly url: string;
  /** The headers as Node.js parsed them. */
  readonly headers: IncomingHttpHeaders;
  /** The route template (`/orders/:id`), or the path where there is no router. */
  readonly route: string;
  /**
   * The body: its raw bytes where the adapter kept them, else the parsed body, else `UNSEEN_BODY` for a body
   * that is there ({@link declaresBody}) but that nothing read.
   */
  readonly body: unknown;
  /** Who owns the key: what the host's `scope` option returned. @default every request shares one scope */
  readonly scope?: string | undefined;
  /** The framework's request, handed to the hooks (`redact`, `rebuildReplay`) as `host`. */
  readonly host: Host;
}

/**
 * `true` when the request declares a body, by a `Transfer-Encoding` or a `Content-Length` above 0: a body
 * that nothing read is then unseen, never hashed as no body.
 */
export function declaresBody(headers: IncomingHttpHeaders): boolean {
  return headers['transfer-encoding'] !== undefined || Number(headers['content-length']) > 0;
}

/**
 * The body `begin` hashes, from what a body parser left on a Node.js request: its raw bytes where the parser
 * kept them (exact: `1e400` and big integers keep their text), else the parsed body; `UNSEEN_BODY` for a body
 * the request declares ({@link declaresBody}) that no parser read to its end (answered 415 before anything is
 * reserved).
 *
 * @param readableEnded whether the request's stream was read to its end
 * @example
 * const body = bodyOfParsed(req.headers, req.readableEnded, req.rawBody, req.body);
 */
export function bodyOfParsed(
  headers: IncomingHttpHeaders,
  readableEnded: boolean | undefined,
  rawBody: unknown,
  parsed: unknown,
): unknown {
  if (Buffer.isBuffer(rawBody) || typeof rawBody === 'string') return rawBody;
  if (declaresBody(headers) && !(readableEnded === true && parsed !== undefined)) return UNSEEN_BODY;
  return parsed;
}

/**
 * The request `begin` needs, from a Node.js request: the path and the raw query split at the first `?`
 * (`/orders?` has an empty query, `/orders` none), the content type, the key header as received, and a
 * `signal` that is created only when the request has to wait behind another with its key (most never do,
 * and an abort signal per request costs).
 *
 * Node.js joins a repeated key header with `", "`; a comma is never valid in a key, so `begin` rejects it as
 * it is.
 *
 * @param idem the coordinator (its `headerName`, and `waits`)
 * @param res the response, whose closing before it is complete aborts the `signal`
 * @example
 * const result = await idem.begin(describeRequest(idem, res, { method, url, headers, route, body, host: req }));
 */
export function describeRequest<Host>(
  idem: Pick<Idempotency, 'headerName' | 'waits'>,
  res: ServerResponse,
  request: NodeRequestParts<Host>,
): IdempotentRequest<Host> {
  return new DescribedRequest(request, request.headers[idem.headerName], idem.waits ? res : undefined);
}

/**
 * What {@link describeRequest} hands `begin`. A class, so that the `signal` getter is one, on the prototype, for
 * every request: defined on each object (`Object.defineProperty(described, 'signal', { get })`), its closure
 * gave every described request a map of its own, made in the old generation, which kept the request it
 * described, and the whole request with it, alive past every young-generation collection: about 4 KB promoted
 * per request, even without a key, wherever requests may wait (docs/benchmarks.md). A host that copies the
 * described request (`{ ...described, route }`) copies its own fields only: pass `signal: described.signal` on.
 */
const RESPONSE = Symbol('@idem/node-http response');

class DescribedRequest<Host> implements IdempotentRequest<Host> {
  readonly method: string;
  readonly route: string;
  readonly path: string;
  readonly query: string | undefined;
  readonly body: unknown;
  readonly contentType: string | undefined;
  readonly key: string | string[] | undefined;
  readonly scope: string | undefined;
  readonly host: Host;
  /**
   * The response whose closing aborts the signal; undefined where no request waits. (A symbol, not a private
   * field: the getter then works on a `Proxy` of the request too.)
   */
  readonly [RESPONSE]: ServerResponse | undefined;

  constructor(
    request: NodeRequestParts<Host>,
    key: string | string[] | undefined,
    res: ServerResponse | undefined,
  ) {
    const { url } = request;
    const queryAt = url.indexOf('?');
    this.method = request.method;
    this.route = request.route;
    this.path = queryAt === -1 ? url : url.slice(0, queryAt);
    this.query = queryAt === -1 ? undefined : url.slice(queryAt + 1);
    this.body = request.body;
    this.contentType = request.headers['content-type'];
    this.key = key;
    this.scope = request.scope;
    this.host = request.host;
    this[RESPONSE] = res;
  }

  /** Made when asked for, only by a request that waits behind another with its key (most never do). */
  get signal(): AbortSignal | undefined {
    const res = this[RESPONSE];
    return res === undefined ? undefined : clientGoneSignal(res);
  }
}
