import type { ServerResponse } from 'node:http';
import type { Execution, HeaderValue } from '@idem/core';
import { isConnectionGone } from './client-gone.js';
import { settleOnResponse } from './settle-on-response.js';

/** Where the headers that went out are read once the response is done (Fastify's reply, or the response). */
export interface HeaderSource {
  getHeaders(): Record<string, HeaderValue> | NodeJS.Dict<HeaderValue>;
}

/**
 * The settlement of a response whose framework hands each answer over whole just before it writes it
 * ({@link settleHandedOver}).
 */
export interface HandedOverSettlement {
  /**
   * The framework is about to write `payload` (Fastify's last `onSend` hook, just before its `done`). A whole
   * body (a string, bytes, or none) is kept as it is; anything else (a stream, a web `Response`) is captured as
   * it is written, from now on.
   */
  sending(payload: unknown): void;
  /**
   * The framework's write of the payload handed over returned, or threw (call it in a `finally`): a whole body
   * has been written by now, unless its head failed (then the framework's error answer comes next).
   */
  sent(): void;
  /**
   * Capture whatever is written on the response from now on, as {@link settleOnResponse} does: for a response
   * the app writes itself (Fastify's `reply.hijack()`).
   */
  captureWrites(): void;
}

/** A body the framework writes as it is, in one piece. */
type Whole = string | Uint8Array | null | undefined;

const isWhole = (payload: unknown): payload is Whole =>
  payload === null || payload === undefined || typeof payload === 'string' || payload instanceof Uint8Array;

/**
 * Settle an execution by the answer its framework hands over whole before writing it, without a listener on the
 * response for it: Fastify hands every answer it sends to its `onSend` hooks, and writes it (a string or a
 * buffer) synchronously when the last one calls `done`. The status, the headers (read from `headers` once the
 * response is done) and the moment of settlement are still those of the response that goes out, as with
 * {@link settleOnResponse}:
 *
 * - the framework has written the whole answer (it ended the response) → `finish` with the status sent, the
 *   headers, and the body it ended the response with, which a later hook may have made (none for a status or
 *   method that has none: 1xx, 204, 304, HEAD), at once, even when the client has left by then: the work is
 *   done, and what it answered is known whole;
 * - an answer that is still being written when the framework returns (trailers to come, HTTP/2 in chunks)
 *   settles when the response closes: as above when it finished, else with the status and no body (the
 *   replay says it was omitted);
 * - the client left before the answer was handed over, and the framework did not end the response with it (a
 *   later hook made a stream of it, which the framework drops for a client that is gone, or is still at work)
 *   → `finish` with the status and no body: the work is done, what would have gone out is not known;
 * - the client leaves before any answer → nothing yet: the handler's answer settles the key when it is
 *   handed over (the coordinator's `maxExecutionMs` bounds a handler that never answers);
 * - the response is destroyed before any answer was handed over (a handler's `reply.raw.destroy()` without
 *   `reply.hijack()`), the client there or not → `abort` at once: the key is released, no answer will come.
 *
 * The response's `writeHead`, `end` and `destroy` are replaced while it is watched, by functions shared by every
 * response (each finds its settlement on the response): no closure or listener is made per request for an
 * answer written whole.
 *
 * What is written any other way is captured as {@link settleOnResponse} captures it, from the moment it starts:
 * a stream or web `Response` handed over, a whole answer that a later hook took on without it going out (as
 * an answer given: a client that leaves before it is written settles the key with its status and no body), a
 * response the app writes itself after `captureWrites()` (a hijacked reply), and a head written on the
 * response directly, outside the framework's send (a body written before any head, which Node.js heads
 * implicitly, is stored as omitted, since its first bytes went by before the head).
 *
 * `finish` and `abort` never throw, so nothing here can reject unhandled.
 */
export function settleHandedOver(
  execution: Execution,
  res: ServerResponse,
  headers: HeaderSource,
): HandedOverSettlement {
  return new HandedOver(execution, res, headers);
}

type Method = (...args: unknown[]) => unknown;

/** Where a response watched by a settlement keeps it: its wrappers below are the same functions for all. */
const WATCHED = Symbol('@idem/node-http handed-over settlement');
type Watched = ServerResponse & { [WATCHED]: HandedOver };

// The response's methods while a settlement watches it: one function each for every response, which finds its
// settlement on the response (no closure made per request). Each hands its call on as it came (`arguments`,
// which the engine passes on to `apply` without building an array).
function watchedWriteHead(this: Watched, _status: number, headers?: unknown): unknown {
  const target = this[WATCHED].head(this, headers === undefined);
  // biome-ignore lint/complexity/noArguments: forwarded whole, without an array per call
  return target.apply(this, arguments as unknown as unknown[]);
}
function watchedEnd(this: Watched, chunk?: unknown): unknown {
  const target = this[WATCHED].ending(chunk);
  // biome-ignore lint/complexity/noArguments: forwarded whole, without an array per call
  return target.apply(this, arguments as unknown as unknown[]);
}
function watchedDestroy(this: Watched): unknown {
  const target = this[WATCHED].destroying(this);
  // biome-ignore lint/complexity/noArguments: forwarded whole, without an array per call
  return target.apply(this, arguments as unknown as unknown[]);
}

/** A class, like everything made per request here (see settle-on-response.ts). */
class HandedOver implements HandedOverSettlement {
  readonly #execution: Execution;
  readonly #res: ServerResponse;
  readonly #headers: HeaderSource;
  readonly #writeHead: Method;
  readonly #end: Method;
  readonly #destroy: Method;
  /** `end` was called while the framework wrote what was handed over, with this chunk: what went out. */
  #ended = false;
  #endChunk: unknown;
  /** The last whole body handed over. */
  #payload: Whole = undefined;
  /** The framework is writing what was handed over: a head now is its own. */
  #sending = false;
  /** The framework's write of the last whole body returned: it went out (or is going out). */
  #written = false;
  /** Everything written is captured from now on, and settled by that capture. */
  #capturing = false;
  #settled = false;
  /** Waiting for the end of an answer still being written. */
  #listening = false;

  constructor(execution: Execution, res: ServerResponse, headers: HeaderSource) {
    this.#execution = execution;
    this.#res = res;
    this.#headers = headers;
    this.#writeHead = res.writeHead as Method;
    // What the framework ends the response with is the body that went out, whichever hook made it (another
    // plugin's onSend hook may come after this one and change the payload).
    this.#end = res.end as Method;
    this.#destroy = res.destroy as Method;
    (res as Watched)[WATCHED] = this;
    res.writeHead = watchedWriteHead as ServerResponse['writeHead'];
    res.end = watchedEnd as ServerResponse['end'];
    res.destroy = watchedDestroy as ServerResponse['destroy'];
  }

  /** A head is being written: the method that writes it. */
  head(res: ServerResponse, statusOnly: boolean): Method {
    // A head outside the framework's send: the app writes on the response itself. Capture from here, through
    // the capture's own wrapper, which reads this head too. (A head with a status alone may be Node's implicit
    // one, inside a `write` or `end` whose bytes go by before any wrapper sees them.)
    if (!this.#sending && !this.#capturing) this.#capture(statusOnly, false);
    return this.#capturing ? (res.writeHead as Method) : this.#writeHead;
  }

  /** The response is being ended with `chunk`: the method that ends it. */
  ending(chunk: unknown): Method {
    if (this.#sending && !this.#ended) {
      this.#ended = true;
      this.#endChunk = chunk;
    }
    return this.#end;
  }

  /** The response is being destroyed: the method that destroys it. */
  destroying(res: ServerResponse): Method {
    // Server code breaks the response off before any answer was handed over (a handler's `reply.raw.destroy()`
    // without `reply.hijack()`), whether its client is still there or not: no answer will come, as when the
    // handler throws. (An answer being written, or captured, settles by its own end or close.)
    if (!this.#settled && !this.#capturing && !this.#sending && !this.#listening && !res.headersSent) {
      this.#settled = true;
      void this.#execution.abort();
    }
    return this.#destroy;
  }

  sending(payload: unknown): void {
    if (this.#settled || this.#capturing) return;
    if (!isWhole(payload)) {
      // A stream that will never be written (the client has left, the framework drops it): the work is done,
      // its body never went out.
      if (isConnectionGone(this.#res)) this.#settle(true);
      else this.#capture(false, true);
      return;
    }
    this.#payload = payload;
    this.#written = false;
    this.#ended = false;
    this.#endChunk = undefined;
    this.#sending = true;
  }

  sent(): void {
    if (!this.#sending) return;
    this.#sending = false;
    const res = this.#res;
    // The body that went out: the chunk the response was ended with, whichever hook made it.
    if (this.#ended) {
      const chunk = this.#endChunk;
      this.#payload = typeof chunk === 'function' ? undefined : isWhole(chunk) ? chunk : undefined;
    }
    if (!res.headersSent) {
      if (isConnectionGone(res)) {
        // The client has left (an HTTP/2 stream that closed writes no head). The answer is known whole when the
        // framework ended the response with it; otherwise a later hook took it on (a stream, dropped for a
        // client that is gone, or a hook still running): its status is known, its body is not.
        this.#written = this.#ended;
        this.#settle(!this.#ended);
        return;
      }
      // Nothing went out yet: its head failed (a header Node refuses), the framework refused the payload, or a
      // later hook turned it into a stream, or is still at work. Whatever is written next, an error answer or
      // that stream, is captured as it is written; the handler has answered, so a client that leaves before
      // it is written settles the key with its status.
      this.#capture(false, true);
      return;
    }
    this.#written = true;
    // Ended: the handler's whole answer is written (even for a client that left: the work is done).
    if (res.writableEnded) this.#settle(false);
    else if (res.destroyed)
      this.#settle(true); // closed already: what was not written never will be
    else if (!this.#listening) {
      // Still being written (trailers to come, HTTP/2 in chunks): settled when it is all out, or cut short.
      this.#listening = true;
      res.once('close', () => this.#closed());
    }
  }

  captureWrites(): void {
    if (this.#settled || this.#capturing) return;
    this.#capture(false, false);
  }

  /**
   * Hand the response over to a capture of everything written from now on; `missedFirstBytes`: a head that
   * may be Node's implicit one, inside a `write` or `end` whose bytes have gone by already; `answered`: the
   * handler's answer was handed over (what is written next is it, or the framework's error answer).
   */
  #capture(missedFirstBytes: boolean, answered: boolean): void {
    this.#capturing = true;
    this.#sending = false;
    const res = this.#res;
    res.writeHead = this.#writeHead as ServerResponse['writeHead'];
    res.end = this.#end as ServerResponse['end'];
    res.destroy = this.#destroy as ServerResponse['destroy'];
    settleOnResponse(this.#execution, res, { bodyUnseen: missedFirstBytes, answered });
  }

  #closed(): void {
    if (this.#settled || this.#capturing) return;
    // Cut short: the status went out, the rest did not.
    this.#settle(!this.#res.writableFinished);
  }

  #settle(incomplete: boolean): void {
    if (this.#settled) return;
    this.#settled = true;
    const res = this.#res;
    const execution = this.#execution;
    const status = res.statusCode;
    const headers = this.#headers.getHeaders() as Record<string, HeaderValue>;
    const payload = this.#written ? this.#payload : undefined;
    const bodiless = status < 200 || status === 204 || status === 304 || execution.method === 'HEAD';
    // Measured before it is copied: a body over the cap is never stored, so never copied either.
    const size = typeof payload === 'string' ? Buffer.byteLength(payload) : (payload?.byteLength ?? 0);
    const truncated = incomplete || !this.#written || size > execution.maxBodyBytes;
    let body: string | Uint8Array | null = null;
    // A copy of bytes, never the app's own buffer: it may reuse it once the response is out.
    // (An empty body is no body, as the capture of written bytes has it.)
    if (!truncated && !bodiless && size > 0)
      body = typeof payload === 'string' ? payload : Buffer.from(payload as Uint8Array);
    const encoding = headers['content-encoding'];
    void execution.finish({
      status,
      headers,
      body,
      bodyTruncated: truncated && !bodiless,
      contentEncoding: encoding === undefined ? undefined : String(encoding),
    });
  }
}
