import type { ServerResponse } from 'node:http';
import type { CapturedResponse, Execution, HeaderValue } from '@idem/core';

type Chunk = string | Uint8Array | null | undefined;

const headerText = (value: HeaderValue): string | undefined =>
  value === undefined ? undefined : Array.isArray(value) ? value.join(', ') : String(value);

/** The Content-Encoding among the headers of a `writeHead(status, [message], headers)` call, if any. */
function encodingOf(args: unknown[]): string | undefined {
  const headers = args.find((arg, i) => i > 0 && typeof arg === 'object' && arg !== null);
  if (Array.isArray(headers)) {
    for (let i = 0; i + 1 < headers.length; i += 2) {
      if (String(headers[i]).toLowerCase() === 'content-encoding') return String(headers[i + 1]);
    }
    return undefined;
  }
  if (headers === undefined) return undefined;
  for (const [name, value] of Object.entries(headers as Record<string, HeaderValue>)) {
    if (name.toLowerCase() === 'content-encoding') return headerText(value);
  }
  return undefined;
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
  /** Called once, right after `end`. */
  onEnd: (() => void) | undefined;

  constructor(res: ServerResponse, maxBodyBytes: number) {
    this.#res = res;
    this.#maxBodyBytes = maxBodyBytes;
    const capture = this;
    const { writeHead, write, end, destroy } = res;
    res.writeHead = function (this: ServerResponse, ...args: unknown[]) {
      // Only the head that goes out counts: a framework's late error answer (writeHead(500) on a response
      // already under way) throws and changes nothing.
      const first = !this.headersSent;
      if (first && !capture.#headPassed) {
        // Read before passing the head on: a compression layer inside this one sets Content-Encoding as the
        // head goes through it, for bytes that pass here still plain.
        capture.#headPassed = true;
        capture.#headEncoding = encodingOf(args) ?? headerText(this.getHeader('content-encoding'));
      }
      const result = (writeHead as (...a: unknown[]) => ServerResponse).apply(this, args);
      if (first) capture.#head(args);
      return result;
    } as typeof res.writeHead;
    res.destroy = function (this: ServerResponse, error?: Error) {
      // Node does not destroy a response when its client leaves; server code that does so while the
      // connection is still open is breaking the answer off.
      if (!capture.ended && this.socket !== null && this.socket?.destroyed === false)
        capture.brokenOff = true;
      return destroy.call(this, error);
    } as typeof res.destroy;
    res.write = function (this: ServerResponse, chunk: Chunk, ...rest: unknown[]) {
      if (!capture.#inEnd) capture.#keep(chunk, rest[0]);
      return (write as (...a: unknown[]) => boolean).call(this, chunk, ...rest);
    } as typeof res.write;
    res.end = function (this: ServerResponse, chunk?: unknown, ...rest: unknown[]) {
      if (typeof chunk !== 'function') capture.#keep(chunk as Chunk, rest[0]);
      // An `end` that writes its chunk through `this.write` (light-my-request's does) is counted once.
      capture.#inEnd = true;
      let result: ServerResponse;
      try {
        result = (end as (...a: unknown[]) => ServerResponse).call(this, chunk, ...rest);
      } finally {
        capture.#inEnd = false;
      }
      if (!capture.ended) {
        capture.ended = true;
        capture.onEnd?.();
      }
      return result;
    } as typeof res.end;
  }

  #head(args: unknown[]): void {
    if (typeof args[0] === 'number') this.#sentStatus = args[0];
    const headers = args.find((arg, i) => i > 0 && typeof arg === 'object' && arg !== null);
    if (Array.isArray(headers)) {
      // The raw form: [name, value, name, value, …]
      for (let i = 0; i + 1 < headers.length; i += 2) {
        this.#headHeaders[String(headers[i]).toLowerCase()] = String(headers[i + 1]);
      }
    } else if (headers !== undefined) {
      for (const [name, value] of Object.entries(headers as Record<string, HeaderValue>)) {
        this.#headHeaders[name.toLowerCase()] = value;
      }
    }
  }

  #keep(chunk: Chunk, encoding: unknown): void {
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
    const truncated = this.#truncated || incomplete;
    return {
      status: this.#sentStatus ?? this.#res.statusCode,
      headers: { ...this.#headHeaders, ...(this.#res.getHeaders() as Record<string, HeaderValue>) },
      body: truncated ? null : Buffer.concat(this.#chunks),
      bodyTruncated: truncated,
      contentEncoding: this.#encoding,
    };
  }
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
 * `finish` never throws, so nothing here can reject unhandled.
 */
export function settleOnResponse(execution: Execution, res: ServerResponse): void {
  const capture = new ResponseCapture(res, execution.maxBodyBytes);
  let settled = false;
  let waiting = false;
  const settle = (incomplete: boolean): void => {
    if (settled) return;
    settled = true;
    void execution.finish(capture.snapshot(incomplete));
  };
  capture.onEnd = () => {
    if (waiting) settle(false);
  };
  res.once('finish', () => settle(false));
  res.once('close', () => {
    if (capture.ended) settle(false);
    else if (res.headersSent) settle(true);
    else if (capture.brokenOff || (res.errored !== null && res.errored !== undefined)) {
      settled = true;
      void execution.abort();
    } else {
      waiting = true;
    }
  });
}
