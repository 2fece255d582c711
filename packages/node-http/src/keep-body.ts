import type { IncomingHttpHeaders } from 'node:http';
import type { Readable } from 'node:stream';
import { Transform } from 'node:stream';
import { type Idempotency, UNSEEN_BODY } from '@idem/core';
import { declaresBody } from './describe-request.js';

/** A request body's bytes, kept as they stream through to its parser (see {@link keepBody}). */
export interface KeptBody {
  /**
   * What to hand the parser in place of the source: the same bytes, the source's errors, and its
   * `receivedEncodedLength` (the bytes that came off the wire, before any decoding; Fastify compares it with
   * `Content-Length`).
   */
  readonly stream: Readable;
  /**
   * The whole body once it went through; `UNSEEN_BODY` until then: a parser that hands the stream on (an
   * upload the handler reads itself) leaves it unread, and what little has arrived is not the body.
   */
  bytes(): Buffer | typeof UNSEEN_BODY;
}

/**
 * Keep the bytes of a request body as they arrive, for a fingerprint of exactly what the client sent, while
 * the parser reads them from {@link KeptBody.stream}. Only a request that `begin` may fingerprint has bytes
 * to keep: a covered method, a key header and a declared body ({@link declaresBody}); for any other this
 * returns `undefined` and `source` is left as it is.
 *
 * @param idem the coordinator (its `covers` and `headerName`)
 * @example
 * // in Fastify's preParsing hook:
 * const kept = keepBody(idem, request, payload);
 * done(null, kept?.stream ?? payload);
 */
export function keepBody(
  idem: Pick<Idempotency, 'covers' | 'headerName'>,
  request: { readonly method: string; readonly headers: IncomingHttpHeaders },
  source: Readable,
): KeptBody | undefined {
  const { headers } = request;
  if (!idem.covers(request.method) || headers[idem.headerName] === undefined || !declaresBody(headers)) {
    return undefined;
  }
  const chunks: Buffer[] = [];
  let complete = false;
  const stream = new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      chunks.push(chunk);
      callback(null, chunk);
    },
    flush(callback) {
      complete = true;
      callback();
    },
  });
  Object.defineProperty(stream, 'receivedEncodedLength', {
    get: () => (source as { receivedEncodedLength?: number }).receivedEncodedLength,
  });
  // pipe, with the source's errors passed on by hand: they reach the parser instead of the process.
  // (pipeline would do that too, at the price of an AbortController and a DOMException per request.)
  source.on('error', (error) => stream.destroy(error));
  source.pipe(stream);
  return { stream, bytes: () => (complete ? Buffer.concat(chunks) : UNSEEN_BODY) };
}
