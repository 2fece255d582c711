import type { ServerResponse } from 'node:http';
import type { CapturedResponse, Execution, HeaderValue } from '@idem/core';

type Chunk = string | Uint8Array | null | undefined;

const headerText = (value: HeaderValue): string | undefined =>
  value === undefined ? undefined : Array.isArray(value) ? value.join(', ') : String(value);

const NOT_HANDED = Symbol('nothing handed over');

/**
 * The headers of a `writeHead(status, [message], headers)` call, lower-cased, in one pass (an object, or the raw
 * `[name, value, …]` form); `undefined` when it passes none.
 */
function headHeadersOf(args: ArrayLike<unknown>): Record<string, HeaderValue> | undefined {
  const headers = typeof args[1] === 'object' && args[1] !== null ? args[1] : args[2];
  if (typeof headers !== 'object' || headers === null) return undefined;
  const lower: Record<string, HeaderValue> = {};
  if (Array.isArray(headers)) {
    for (let i = 0; i + 1 < headers.length; i += 2)
      lower[String(headers[i]).toLowerCase()] = String(headers[i + 1]);
    return lower;
  }
  for (const name in headers) {
    if (Object.hasOwn(headers, name))
      lower[name.toLowerCase()] = (headers as Record<string, HeaderValue>)[name];
  }
  return lower;
}

function toBuffer(chunk: Chunk, encoding: unknown): Buffer | undefined {
  if (chunk === null || chunk === undefined) return undefined;
  if (typeof chunk === 'string') {
    return Buffer.from(chunk, (typeof encoding === 'string' ? encoding : 'utf8') as BufferEncoding);
  }
  return Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
}

/**
 * What a handler writes to a Node.js response, recorded where it is really written: `writeHead`, `write` and
 * `end`, and so everything built on them (Express's `res.json`, Fastify's `reply.send` of strings, buffers,
 * Node and web streams and `Response` objects, `reply.hijack()`, piped files). Bytes are kept up to the
 * cap; beyond it only the fact that the body was too large.
 */
class ResponseCapture {
  readonly #res: ServerResponse;
  readonly #maxBodyBytes: number;
  readonly #chunks: Buffer[] = [];
  #size = 0;
  #truncated = false;
  // Headers handed straight to writeHead are not always visible through getHeaders().
  #headHeaders: Record<string, HeaderValue> = {};
  /** The Content-Encoding in force when the first body byte passed: what the captured bytes are. */
  #encoding: string | undefined;
  /** The Content-Encoding as the head passed through here, before the layers inside could change it. */
  #headEncoding: string | undefined;
  #headPassed = false;
  #sawBody = false;
  #inEnd = false;
  /** The status as it went out on the status line: a framework may change `statusCode` after that. */
  #sentStatus: number | undefined;
  /** `true` once the handler (or its framework) called `end`: the response is complete as the app sees it. */
  ended = false;
  /** `true` when server code destroyed the response while its connection was still open. */
  brokenOff = false;
  /**
   * The body the framework handed over before writing it ({@link ResponseCapture.expect}): while the one chunk
   * written is that very value, it is not copied as it passes. `NOT_HANDED` when nothing was handed over.
   */
  #expected: unknown = NOT_HANDED;
  /** The handed-over body went out, as the one chunk written. */
  #matched = false;

  readonly #owner: { ended(): void };

  /** @param owner told right after `end` */
  constructor(res: ServerResponse, maxBodyBytes: number, owner: { ended(): void }) {
    this.#owner = owner;
    this.#res = res;
    this.#maxBodyBytes = maxBodyBytes;
    const capture = this;
    const { writeHead, write, end, destroy } = res;
    // Each wrapper hands its call on as it came (`arguments`, which the engine passes on without building an
    // array): most calls only pass through.
    res.writeHead = function (this: ServerResponse) {
      // biome-ignore lint/complexity/noArguments: forwarded whole, without an array per call
      const passed = arguments as unknown as unknown[];
      // Only the head that goes out counts: a framework's late error answer (writeHead(500) on a response
      // already under way) throws and changes nothing.
      const first = !this.headersSent;
      // Most heads pass only a status (Node's own implicit head does): nothing else to read then.
      const headers = first && passed.length > 1 ? headHeadersOf(passed) : undefined;
      if (first && !capture.#headPassed) {
        // Read before passing the head on: a compression layer inside this one sets Content-Encoding as the
        // head goes through it, for bytes that pass here still plain.
        capture.#headPassed = true;
        capture.#headEncoding =
          headerText(headers?.['content-encoding']) ?? headerText(this.getHeader('content-encoding'));
      }
      const result = (writeHead as (...a: unknown[]) => ServerResponse).apply(this, passed);
      if (first) {
        if (typeof passed[0] === 'number') capture.#sentStatus = passed[0];
        if (headers !== undefined) Object.assign(capture.#headHeaders, headers);
      }
      return result;
    } as typeof res.writeHead;
    res.destroy = function (this: ServerResponse, error?: Error) {
      // Node does not destroy a response when its client leaves; server code that does so while the
      // connection is still open is breaking the answer off.
      if (!capture.ended && this.socket !== null && this.socket?.destroyed === false)
        capture.brokenOff = true;
      return destroy.call(this, error);
    } as typeof res.destroy;
    res.write = function (this: ServerResponse, chunk: Chunk, encoding?: unknown) {
      if (!capture.#inEnd) capture.#keep(chunk, encoding);
      // biome-ignore lint/complexity/noArguments: forwarded whole, without an array per call
      return (write as (...a: unknown[]) => boolean).apply(this, arguments as unknown as unknown[]);
    } as typeof res.write;
    res.end = function (this: ServerResponse, chunk?: unknown, encoding?: unknown) {
      if (typeof chunk !== 'function') capture.#keep(chunk as Chunk, encoding);
      // An `end` that writes its chunk through `this.write` (light-my-request's does) is counted once.
      capture.#inEnd = true;
      let result: ServerResponse;
      try {
        // biome-ignore lint/complexity/noArguments: forwarded whole, without an array per call
        result = (end as (...a: unknown[]) => ServerResponse).apply(this, arguments as unknown as unknown[]);
      } finally {
        capture.#inEnd = false;
      }
      // An `end` after server code broke the response off (a framework's error handler closing it) writes
      // nothing: the response did not end.
      if (!capture.ended && !capture.brokenOff) {
        capture.ended = true;
        capture.#owner.ended();
      }
      return result;
    } as typeof res.end;
  }

  /**
   * The framework hands `body` over whole before writing it (a string, bytes, or nothing): when it goes out as
   * the one chunk written, it is kept by reference as it passes and copied once at the end. Anything else
   * written instead (a later hook's payload, a stream) makes the body one that was not seen whole: the record
   * keeps the status and says the body was omitted. Ignored once a body byte or the head went out.
   */
  expect(body: string | Uint8Array | null | undefined): void {
    if (this.#sawBody || this.#res.headersSent || this.#truncated) return;
    this.#expected = body;
  }

  #keep(chunk: Chunk, encoding: unknown): void {
    if (this.#expected !== NOT_HANDED) {
      if (chunk === null || chunk === undefined || chunk.length === 0) return;
      if (!this.#matched && chunk === this.#expected) {
        this.#matched = true;
        this.#sawBody = true;
        this.#encoding = this.#headPassed
          ? this.#headEncoding
          : headerText(this.#res.getHeader('content-encoding'));
        if (chunk.length > this.#maxBodyBytes) this.#truncated = true; // (a string's length is a lower bound)
        return;
      }
      this.#truncated = true; // not the body handed over, or more than it
      this.#sawBody = true;
      return;
    }
    const buffer = toBuffer(chunk, encoding);
    if (buffer === undefined || buffer.length === 0) return;
    if (!this.#sawBody) {
      this.#sawBody = true;
      // A compression layer mounted outside this one sets the header before it writes through here.
      this.#encoding = this.#headPassed
        ? this.#headEncoding
        : headerText(this.#res.getHeader('content-encoding'));
    }
    if (this.#truncated) return;
    this.#size += buffer.length;
    if (this.#size > this.#maxBodyBytes) {
      this.#truncated = true;
      this.#chunks.length = 0;
      return;
    }
    this.#chunks.push(buffer);
  }

  /** The response as written so far; `incomplete` marks a body that will never be whole. */
  snapshot(incomplete: boolean): CapturedResponse {
    let truncated = this.#truncated || incomplete;
    let body: Buffer | null = null;
    if (!truncated) {
      // A copy, never the app's own buffer: it may reuse it once the response is out.
      if (this.#expected === NOT_HANDED) body = Buffer.concat(this.#chunks);
      // Handed over with no body, and none went out: no body at all, not an empty one.
      else if (!this.#matched) body = null;
      else {
        const expected = this.#expected as string | Uint8Array;
        // Measured before it is copied: a body over the cap is never stored, so never copied either.
        truncated = Buffer.byteLength(expected) > this.#maxBodyBytes;
        if (!truncated)
          body = typeof expected === 'string' ? Buffer.from(expected, 'utf8') : Buffer.from(expected);
      }
    }
    return {
      status: this.#sentStatus ?? this.#res.statusCode,
      headers: { ...this.#headHeaders, ...(this.#res.getHeaders() as Record<string, HeaderValue>) },
      body: truncated ? null : body,
      bodyTruncated: truncated,
      contentEncoding: this.#encoding,
    };
  }
}

/**
 * What an adapter may tell the settlement of a response ({@link settleOnResponse}) before it is written.
 */
export interface ResponseSettlement {
  /**
   * The body as the framework hands it over just before writing it (Fastify's `onSend` payload). A whole one (a
   * string, bytes, or none) is then not copied as it is written: when it goes out as the response's one chunk
   * it is the stored body (copied once). The status and headers are still those that go out, and the key is
   * settled when the response ends, as ever: a head that fails, or a later hook that writes something else,
   * decides. Anything else (a stream, a web `Response`) is captured as it is written. `true` when taken.
   *
   * @example
   * // in Fastify's onSend hook:
   * settlement?.handOver(payload);
   */
  handOver(payload: unknown): boolean;
}

/**
 * Settle an execution by what happens to its Node.js response (Express's `res`, Fastify's `reply.raw`), the
 * one lifecycle both adapters share. Call it just before the handler runs, after checking `isResponseGone`
 * (`startExecution` does both); it captures what is written (up to `execution.maxBodyBytes`) and then:
 *
 * - the response ends (the handler answered) → `finish` with it: stored or released by its status, even
 *   when the client has gone by then, because the work is done;
 * - the connection closes after the status was sent but before the end → `finish` with the status and no
 *   body (a body cut short is never stored; the replay says it was omitted);
 * - the server breaks the response off before any status (a failed stream piped with `pipeline`, a
 *   `res.destroy()` while the connection is open) → `abort`: the key is released;
 * - the client leaves before any status → nothing is decided yet: the handler is still running, under its
 *   renewed lease, and its answer settles the key when it comes (the coordinator's `maxExecutionMs` bounds a
 *   handler that never answers).
 *
 * A framework that hands the whole body over before writing it (Fastify's `onSend`) passes it to the
 * returned settlement's `handOver`, so that it is not copied as it is written; what goes out still decides.
 *
 * `finish` never throws, so nothing here can reject unhandled.
 */
export function settleOnResponse(execution: Execution, res: ServerResponse): ResponseSettlement {
  return new Settlement(execution, res);
}

/**
 * The settlement of one execution by its response. A class, like everything made per request here: an object
 * literal holding closures over the request would be built at an allocation site that the engine may come
 * to allocate in the old generation, where it keeps every request it points to alive past the young
 * collections.
 */
class Settlement implements ResponseSettlement {
  readonly #execution: Execution;
  readonly #res: ServerResponse;
  readonly #capture: ResponseCapture;
  #settled = false;
  /** The client left before any status: the handler's answer settles the key when it comes. */
  #waiting = false;

  constructor(execution: Execution, res: ServerResponse) {
    this.#execution = execution;
    this.#res = res;
    this.#capture = new ResponseCapture(res, execution.maxBodyBytes, this);
    res.once('finish', () => this.#settle(false));
    res.once('close', () => this.#closed());
  }

  handOver(payload: unknown): boolean {
    if (this.#settled) return false;
    const whole =
      payload === null ||
      payload === undefined ||
      typeof payload === 'string' ||
      payload instanceof Uint8Array;
    if (whole) this.#capture.expect(payload);
    return whole;
  }

  /** Called by the capture right after `end`. */
  ended(): void {
    if (this.#waiting) this.#settle(false);
  }

  #settle(incomplete: boolean): void {
    if (this.#settled) return;
    this.#settled = true;
    void this.#execution.finish(this.#capture.snapshot(incomplete));
  }

  #closed(): void {
    const res = this.#res;
    const capture = this.#capture;
    if (capture.ended) this.#settle(false);
    else if (res.headersSent) this.#settle(true);
    else if (capture.brokenOff || (res.errored !== null && res.errored !== undefined)) {
      if (this.#settled) return;
      this.#settled = true;
      void this.#execution.abort();
    } else {
      this.#waiting = true;
    }
  }
}
