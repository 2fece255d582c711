import type { IncomingHttpHeaders } from 'node:http';
import type { Readable } from 'node:stream';
import { type Idempotency, UNSEEN_BODY } from '@idem/core';
import { declaresBody } from './describe-request.js';

/** A request body's bytes, kept as they reach its stream (see {@link keepBody}). */
export interface KeptBody {
  /** What to hand the parser: the source itself, whose bytes are now kept as they arrive. */
  readonly stream: Readable;
  /**
   * The whole body once its reader read it to the end; `UNSEEN_BODY` until then: a parser that hands the
   * stream on (an upload the handler reads itself) leaves it unread, and what has arrived is not the body.
   */
  bytes(): Buffer | typeof UNSEEN_BODY;
}

type Push = Readable['push'];

const toBuffer = (chunk: unknown, encoding: unknown): Buffer | undefined => {
  if (typeof chunk === 'string') {
    return Buffer.from(chunk, (typeof encoding === 'string' ? encoding : 'utf8') as BufferEncoding);
  }
  if (Buffer.isBuffer(chunk)) return chunk;
  if (chunk instanceof Uint8Array) return Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
  return undefined;
};

/**
 * Keep the bytes of a request body as they arrive, for a fingerprint of exactly what the client sent, while
 * its parser reads the stream as it would have. Only a request that `begin` may fingerprint has bytes to keep:
 * a covered method, a key header and a declared body ({@link declaresBody}); for any other this returns
 * `undefined` and `source` is left as it is.
 *
 * Nothing is put between the source and its reader (a `Transform` per request cost more than the rest of the
 * request): the bytes are taken where every readable stream receives them, its `push`, before any decoding
 * a reader asks for (`setEncoding`), so that invalid UTF-8 stays the bytes it was. Bytes that arrived before
 * this call are read out of the stream's buffer and put back in front, in order.
 *
 * @param idem the coordinator (its `covers` and `headerName`)
 * @example
 * // in Fastify's preParsing hook:
 * const kept = keepBody(idem, request, payload);
 * done(null, payload);
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
  return new KeptBytes(source);
}

/** The bytes of one body as they arrive (a class, as is everything made per request: see settleOnResponse). */
class KeptBytes implements KeptBody {
  readonly stream: Readable;
  readonly #chunks: Buffer[] = [];
  /** Bytes some reader took before this call cannot be had any more: the body stays unseen. */
  #missed: boolean;

  constructor(source: Readable) {
    this.stream = source;
    const chunks = this.#chunks;
    this.#missed = source.readableDidRead || source.readableEnded || source.readableFlowing === true;
    if (!this.#missed && source.readableLength > 0) {
      // Arrived already (while an earlier hook ran): taken out whole and put back at the front.
      const early = source.read() as unknown;
      const bytes = toBuffer(early, source.readableEncoding);
      if (bytes === undefined) this.#missed = true;
      else chunks.push(bytes);
      if (early !== null) source.unshift(early as Buffer);
    }
    const push: Push = source.push;
    source.push = function keep(this: Readable, chunk: unknown, encoding?: BufferEncoding) {
      const bytes = toBuffer(chunk, encoding);
      if (bytes !== undefined && bytes.length > 0) chunks.push(bytes);
      return push.call(this, chunk, encoding);
    };
  }

  bytes(): Buffer | typeof UNSEEN_BODY {
    const source = this.stream;
    if (this.#missed || !source.readableEnded || source.errored !== null) return UNSEEN_BODY;
    const chunks = this.#chunks;
    return chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks);
  }
}
