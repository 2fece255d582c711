import type { ServerResponse } from 'node:http';
import type { Execution, HeaderValue } from '@idem/core';
import { isConnectionGone } from './client-gone.js';
import { settleOnResponse } from './settle-on-response.js';

/**
 * Where the headers that went out are read by name once the response is done (Fastify's reply, which holds the
 * headers it hands straight to `writeHead` as well as those set on the response).
 */
export interface HeaderSource {
  getHeader(name: string): HeaderValue;
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

/** A header's value as Node and Fastify hold one (anything else read by name is not a header). */
const isHeaderValue = (value: unknown): value is HeaderValue =>
  typeof value === 'string' || typeof value === 'number' || Array.isArray(value);

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
 * - the framework did not end the response with what was handed over (a later hook is still at work: it may
 *   change the status, fail, or make a stream of it) → whatever is written next is captured, the client there
 *   or not: an answer ended is stored whole, a fault's error answer releases the key, a stream written for a
 *   client that has left stores the status and no body;
 * - the client leaves before any answer → nothing yet: the handler's answer settles the key when it is
 *   handed over (the coordinator's `maxExecutionMs` bounds a handler that never answers);
 * - the response is destroyed before any answer was handed over (a handler's `reply.raw.destroy()` without
 *   `reply.hijack()`), the client there or not → `abort` at once: the key is released, no answer will come.
 *
 * The response's `writeHead`, `write`, `end` and `destroy` are replaced while it is watched, by functions
 * shared by every response (each finds its settlement on the response): no closure or listener is made per
 * request for an answer written whole.
 *
 * What is written any other way is captured as {@link settleOnResponse} captures it, from the moment it starts:
 * a stream or web `Response` handed over, a whole answer that a later hook took on without it going out, a
 * response the app writes itself after `captureWrites()` (a hijacked reply), and anything written on the
 * response directly, outside the framework's send (a head, a body written before any head, an `end`): the
 * call that starts it is the capture's first, so no byte goes by unseen.
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
function watchedWriteHead(this: Watched): unknown {
  const target = this[WATCHED].head(this);
  // biome-ignore lint/complexity/noArguments: forwarded whole, without an array per call
  return target.apply(this, arguments as unknown as unknown[]);
}
function watchedWrite(this: Watched): unknown {
  const target = this[WATCHED].writing(this);
  // biome-ignore lint/complexity/noArguments: forwarded whole, without an array per call
  return target.apply(this, arguments as unknown as unknown[]);
}
function watchedEnd(this: Watched, chunk?: unknown): unknown {
  const target = this[WATCHED].ending(this, chunk);
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
  readonly #write: Method;
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
  /** The response's `close` listeners when the last whole body was handed over. */
  #closeListeners = 0;

  constructor(execution: Execution, res: ServerResponse, headers: HeaderSource) {
    this.#execution = execution;
    this.#res = res;
    this.#headers = headers;
    this.#writeHead = res.writeHead as Method;
    this.#write = res.write as Method;
    // What the framework ends the response with is the body that went out, whichever hook made it (another
    // plugin's onSend hook may come after this one and change the payload).
    this.#end = res.end as Method;
    this.#destroy = res.destroy as Method;
    (res as Watched)[WATCHED] = this;
    res.writeHead = watchedWriteHead as ServerResponse['writeHead'];
    res.write = watchedWrite as ServerResponse['write'];
    res.end = watchedEnd as ServerResponse['end'];
    res.destroy = watchedDestroy as ServerResponse['destroy'];
  }

  /**
   * A head is being written: the method that writes it. Outside the framework's send, the app writes on the
   * response itself: captured from here, through the capture's own wrapper, which reads this head too. (Node's
   * implicit head comes from inside a `write` or an `end`, which began the capture already.)
   */
  head(res: ServerResponse): Method {
    if (this.#outside()) this.#capture(false, false);
    return this.#capturing ? (res.writeHead as Method) : this.#writeHead;
  }

  /** A body is being written: the method that writes it (the capture's, outside the framework's send). */
  writing(res: ServerResponse): Method {
    if (this.#outside()) this.#capture(false, false);
    return this.#capturing ? (res.write as Method) : this.#write;
  }

  /** The response is being ended with `chunk`: the method that ends it. */
  ending(res: ServerResponse, chunk: unknown): Method {
    if (this.#sending) {
      if (!this.#ended) {
        this.#ended = true;
        this.#endChunk = chunk;
      }
      return this.#end;
    }
    // Ended outside the framework's send, by the app itself: captured, its chunk and its implicit head with it.
    if (this.#outside()) this.#capture(false, false);
    return this.#capturing ? (res.end as Method) : this.#end;
  }

  /**
   * A call on the response now is the app's own, outside the framework's send: nothing handed over is being
   * written, or still going out, and nothing has settled the key.
   */
  #outside(): boolean {
    return !this.#sending && !this.#capturing && !this.#settled && !this.#written;
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
    this.#closeListeners = this.#res.listenerCount('close');
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
      if (this.#ended) {
        // The framework ended the response with the answer, and no head went out: the client has left (an
        // HTTP/2 stream that closed writes none). The answer is known whole.
        this.#written = true;
        this.#settle(false);
        return;
      }
      // Nothing went out yet: its head failed (a header Node refuses), the framework refused the payload, a
      // later hook made a stream of it that the framework has begun to write (it watches the response's close
      // for it), or a later hook is still at work (it may change the status, fail, or make a stream of it).
      // Whatever is written next, that answer or an error answer, is captured as it is written, the client
      // there or not: an end stores it whole, a fault releases the key. A stream already taken on is the
      // answer given: a client that leaves before it is written settles the key with the status alone; while
      // a hook is at work, nothing is decided until it hands its answer on.
      this.#capture(false, res.listenerCount('close') > this.#closeListeners);
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
    res.write = this.#write as ServerResponse['write'];
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
    // Only the headers that are stored: reading every header into a new object cost more than the rest of
    // the capture. Fastify keeps the reply's headers in a plain object, whose prototype answers a name such as
    // `constructor` with a function, never a header: the response's own headers answer then.
    const source = this.#headers;
    const headers: Record<string, HeaderValue> = Object.create(null);
    for (const name of execution.storedHeaders) {
      const value = source.getHeader(name);
      const header = isHeaderValue(value) ? value : res.getHeader(name);
      if (header !== undefined) headers[name] = header;
    }
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
    const encoding = source.getHeader('content-encoding');
    void execution.finish({
      status,
      headers,
      body,
      bodyTruncated: truncated && !bodiless,
      contentEncoding: encoding === undefined ? undefined : String(encoding),
    });
  }
}
