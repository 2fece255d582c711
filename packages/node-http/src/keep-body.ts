import type { IncomingHttpHeaders } from 'node:http';
import type { Readable } from 'node:stream';
import { Transform, type TransformOptions } from 'node:stream';
import { type Idempotency, UNSEEN_BODY } from '@idem/core';
import { declaresBody } from './describe-request.js';

/** A request body's bytes, kept as its parser reads them (see {@link keepBody}). */
export interface KeptBody {
  /**
   * What to hand the parser in place of the source: the source itself when its bytes are taken as they arrive,
   * else a stream with the same bytes, the source's errors and its `receivedEncodedLength`.
   */
  readonly stream: Readable;
  /**
   * The whole body once its reader read it to the end; `UNSEEN_BODY` until then: a parser that hands the
   * stream on (an upload the handler reads itself) leaves it unread, and what has arrived is not the body.
   */
  bytes(): Buffer | typeof UNSEEN_BODY;
}

type Push = Readable['push'];

/**
 * Keep the bytes of a request body as its parser reads them, for a fingerprint of exactly what the client sent.
 * Only a request that `begin` may fingerprint has bytes to keep: a covered method, a key header and a declared
 * body ({@link declaresBody}); for any other this returns `undefined` and `source` is left as it is.
 *
 * A stream nobody has touched yet (the common case: no earlier hook read it, decoded it or set it flowing) is
 * handed to the parser as it is: its bytes are taken where it receives them, its `push`, before any decoding
 * its reader asks for, and bytes that arrived before this call are read out of its buffer and put back in
 * front. (A `Transform` per request cost more than the rest of the request.) Any other stream is read through
 * a tee, which sees exactly what the parser will: what is left in the stream, as the stream gives it.
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
  const untouched =
    source.readableEncoding === null &&
    !source.readableObjectMode &&
    !source.readableDidRead &&
    source.readableFlowing === null &&
    !source.readableEnded;
  return untouched ? new PushedBytes(source) : new TeedBytes(source);
}

/** The bytes of an untouched stream, taken at its `push` (a class: one object per request, no closures). */
class PushedBytes implements KeptBody {
  readonly stream: Readable;
  readonly #chunks: Buffer[] = [];

  constructor(source: Readable) {
    this.stream = source;
    const chunks = this.#chunks;
    if (source.readableLength > 0) {
      // Arrived already (while an earlier hook ran): taken out whole, as bytes, and put back at the front.
      const early = source.read() as Buffer;
      chunks.push(early);
      source.unshift(early);
    }
    const push: Push = source.push;
    source.push = function keep(this: Readable, chunk: unknown, encoding?: BufferEncoding) {
      if (Buffer.isBuffer(chunk)) {
        if (chunk.length > 0) chunks.push(chunk);
      } else if (typeof chunk === 'string') {
        chunks.push(Buffer.from(chunk, encoding ?? 'utf8'));
      } else if (chunk instanceof Uint8Array) {
        chunks.push(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength));
      }
      return push.call(this, chunk, encoding);
    };
  }

  bytes(): Buffer | typeof UNSEEN_BODY {
    const source = this.stream;
    if (!source.readableEnded || source.errored !== null) return UNSEEN_BODY;
    const chunks = this.#chunks;
    return chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks);
  }
}

const SOURCE = Symbol('@idem/node-http tee source');

/**
 * The tee: a `Transform` that answers the source's `receivedEncodedLength` (what Fastify checks against the
 * body limit) from a getter on its prototype. Defined on each stream, the getter's closure gave every stream a
 * hidden class of its own in the old generation, which kept the request alive past young-generation collections.
 */
class Tee extends Transform {
  readonly [SOURCE]: Readable;

  constructor(source: Readable, options: TransformOptions) {
    super(options);
    this[SOURCE] = source;
  }

  get receivedEncodedLength(): number | undefined {
    return (this[SOURCE] as { receivedEncodedLength?: number }).receivedEncodedLength;
  }
}

/** The bytes of a stream someone else touched first, through a tee that the parser reads. */
class TeedBytes implements KeptBody {
  readonly stream: Readable;
  readonly #chunks: Buffer[] = [];
  #complete = false;

  constructor(source: Readable) {
    const chunks = this.#chunks;
    const stream = new Tee(source, {
      transform(chunk: Buffer, _encoding, callback) {
        chunks.push(chunk);
        callback(null, chunk);
      },
      flush: (callback) => {
        this.#complete = true;
        callback();
      },
    });
    // pipe, with the source's errors passed on by hand: they reach the parser instead of the process.
    // (pipeline would do that too, at the price of an AbortController and a DOMException per request.)
    source.on('error', (error) => stream.destroy(error));
    source.pipe(stream);
    this.stream = stream;
  }

  bytes(): Buffer | typeof UNSEEN_BODY {
    return this.#complete ? Buffer.concat(this.#chunks) : UNSEEN_BODY;
  }
}
