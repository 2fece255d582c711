import { ServerResponse } from 'node:http';
import type { CapturedResponse, Execution, HeaderValue } from '@idem/core';
import { isConnectionGone } from './client-gone.js';

type Chunk = string | Uint8Array | null | undefined;

const headerText = (value: HeaderValue): string | undefined =>
  value === undefined ? undefined : Array.isArray(value) ? value.join(', ') : String(value);

/**
 * The headers of a `writeHead(status, [message], headers)` call, lower-cased, in one pass (an object, or the raw
 * `[name, value, …]` form); `undefined` when it passes none. A name given twice (in the raw form, or in two cases)
 * is sent on a line each, and kept as both values.
 */
function headHeadersOf(args: ArrayLike<unknown>): Record<string, HeaderValue> | undefined {
  const headers = typeof args[1] === 'object' && args[1] !== null ? args[1] : args[2];
  if (typeof headers !== 'object' || headers === null) return undefined;
  // No prototype: a name such as `constructor` is a header here or nothing.
  const lower: Record<string, HeaderValue> = Object.create(null);
  if (Array.isArray(headers)) {
    for (let i = 0; i + 1 < headers.length; i += 2) {
      const value = headers[i + 1];
      addHeader(lower, String(headers[i]), Array.isArray(value) ? value.map(String) : String(value));
    }
    return lower;
  }
  for (const name in headers) {
    if (Object.hasOwn(headers, name)) addHeader(lower, name, (headers as Record<string, HeaderValue>)[name]);
  }
  return lower;
}

/** `value` under `name`, lower-cased, after any value already there. */
function addHeader(headers: Record<string, HeaderValue>, name: string, value: HeaderValue): void {
  const key = name.toLowerCase();
  const held = headers[key];
  headers[key] = held === undefined ? value : [held, value].flat().map(String);
}

function toBuffer(chunk: Chunk, encoding: unknown): Buffer | undefined {
  if (chunk === null || chunk === undefined) return undefined;
  if (typeof chunk === 'string') {
    return Buffer.from(chunk, (typeof encoding === 'string' ? encoding : 'utf8') as BufferEncoding);
  }
  return Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
}

type Method = (...args: unknown[]) => unknown;

/**
 * Where a response captured through its prototype keeps its capture: in the app's per-request `res.locals`,
 * and on its socket.
 */
const CAPTURE = Symbol('@idem/node-http capture');
type Localized = ServerResponse & { locals: { [CAPTURE]?: ResponseCapture } };
/** The socket keeps its current response's capture too: `res.locals` may be replaced by the app. */
type Carrier = { [CAPTURE]?: ResponseCapture };

const CAPTURED = ['writeHead', 'write', 'end', 'destroy'] as const;
/** Prototypes that carry the capture's wrappers (each framework's response object, patched once). */
const patched = new WeakSet<object>();

/**
 * `true` when the response is captured by wrappers on its prototype: a response of a framework that gives it a
 * prototype of its own below Node's (Express's `res`) and a per-request `locals` object, with none of the four
 * methods wrapped on the response itself (by a layer mounted before, such as compression, whose wrappers must
 * stay above the capture). Express gives every response its prototype anew, and a new property on such an
 * object costs the engine far more than on one whose shape it knows: wrappers put on every response were the
 * largest part of a keyed request's cost on Express. The wrappers go on the framework's topmost response
 * object (Express's, which every app's and sub-app's `res` prototype inherits from) once, and pass a call
 * straight on for a response without a capture.
 */
function capturesOnPrototype(res: ServerResponse): boolean {
  const locals = (res as { locals?: unknown }).locals;
  // (A frozen or sealed `locals` cannot hold the capture: the response is wrapped itself.)
  if (typeof locals !== 'object' || locals === null || !Object.isExtensible(locals)) return false;
  for (const name of CAPTURED) if (Object.hasOwn(res, name)) return false;
  // The framework's object right above Node's own response prototype.
  let target: object | null = Object.getPrototypeOf(res);
  while (target !== null && Object.getPrototypeOf(target) !== ServerResponse.prototype) {
    target = Object.getPrototypeOf(target);
  }
  if (target === null) return false;
  if (!patched.has(target)) patchPrototype(target);
  return true;
}

function patchPrototype(target: object): void {
  patched.add(target);
  const proto = target as Record<(typeof CAPTURED)[number], Method>;
  const { writeHead, write, end, destroy } = proto;
  // Only this response's own capture: one `locals` object an app shares between responses holds another's. An
  // app that replaced `res.locals` meanwhile leaves it on the connection's socket (one response at a time).
  const captureOf = (res: ServerResponse): ResponseCapture | undefined => {
    const capture = (res as Localized).locals?.[CAPTURE];
    if (capture?.isFor(res) === true) return capture;
    const onSocket = (res.socket as Carrier | null)?.[CAPTURE];
    return onSocket?.isFor(res) === true ? onSocket : undefined;
  };
  proto.writeHead = function (this: ServerResponse) {
    // biome-ignore lint/complexity/noArguments: forwarded whole, without an array per call
    const passed = arguments as unknown as unknown[];
    const capture = captureOf(this);
    return capture === undefined ? writeHead.apply(this, passed) : capture.writeHead(this, writeHead, passed);
  };
  proto.write = function (this: ServerResponse) {
    // biome-ignore lint/complexity/noArguments: forwarded whole, without an array per call
    const passed = arguments as unknown as unknown[];
    const capture = captureOf(this);
    return capture === undefined ? write.apply(this, passed) : capture.write(this, write, passed);
  };
  proto.end = function (this: ServerResponse) {
    // biome-ignore lint/complexity/noArguments: forwarded whole, without an array per call
    const passed = arguments as unknown as unknown[];
    const capture = captureOf(this);
    return capture === undefined ? end.apply(this, passed) : capture.end(this, end, passed);
  };
  proto.destroy = function (this: ServerResponse) {
    // biome-ignore lint/complexity/noArguments: forwarded whole, without an array per call
    const passed = arguments as unknown as unknown[];
    const capture = captureOf(this);
    return capture === undefined ? destroy.apply(this, passed) : capture.destroy(this, destroy, passed);
  };
}

/** What a capture tells the settlement that owns it. */
interface CaptureOwner {
  /** The app (or its framework) ended the response. */
  ended(): void;
  /** Server code destroyed the response after its client left, before any status went out. */
  brokenOffAfterLeaving(): void;
  /** The handler wrote a body after its client left, before any status went out (see `awaitAnswer`). */
  wroteAfterLeaving(): void;
}

/**
 * `true` while a readable stream is piped into `res`: `Readable.prototype.pipe` listens for the destination's
 * `unpipe` until the pipe is undone (nothing else listens for it on a response).
 */
const isPipedInto = (res: ServerResponse): boolean => res.listenerCount('unpipe') > 0;

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
  /** The first chunk kept was made here from a string (a copy of its own, not the app's bytes). */
  #madeHere = false;
  #truncated = false;
  // Headers handed straight to writeHead are not always visible through getHeaders().
  #headHeaders: Record<string, HeaderValue> = Object.create(null);
  /** The Content-Encoding in force when the first body byte passed: what the captured bytes are. */
  #encoding: string | undefined;
  /** The Content-Encoding as the head passed through here, before the layers inside could change it. */
  #headEncoding: string | undefined;
  #headPassed = false;
  #sawBody = false;
  #inEnd = false;
  /** The client left before any status: the next write is the handler's answer (`awaitAnswer`). */
  #awaitingAnswer = false;
  /** The status as it went out on the status line: a framework may change `statusCode` after that. */
  #sentStatus: number | undefined;
  /** `true` once the handler (or its framework) called `end`: the response is complete as the app sees it. */
  ended = false;
  /** `true` when server code destroyed the response while its connection was still open. */
  brokenOff = false;

  readonly #owner: CaptureOwner;

  /**
   * @param owner told right after `end`, and of a destroy after the client left
   * @param bodyUnseen bytes of the body may have gone by before this capture began: the body is not kept
   */
  constructor(res: ServerResponse, maxBodyBytes: number, owner: CaptureOwner, bodyUnseen: boolean) {
    this.#owner = owner;
    this.#res = res;
    this.#maxBodyBytes = maxBodyBytes;
    this.#truncated = bodyUnseen;
    if (capturesOnPrototype(res)) {
      // The response's own methods stay as they are: the wrappers on its prototype find this capture.
      (res as Localized).locals[CAPTURE] = this;
      if (res.socket !== null) (res.socket as Carrier)[CAPTURE] = this;
      return;
    }
    const capture = this;
    const { writeHead, write, end, destroy } = res as unknown as Record<(typeof CAPTURED)[number], Method>;
    // Each wrapper hands its call on as it came (`arguments`, which the engine passes on without building an
    // array): most calls only pass through.
    res.writeHead = function (this: ServerResponse) {
      // biome-ignore lint/complexity/noArguments: forwarded whole, without an array per call
      return capture.writeHead(this, writeHead, arguments as unknown as unknown[]);
    } as typeof res.writeHead;
    res.destroy = function (this: ServerResponse) {
      // biome-ignore lint/complexity/noArguments: forwarded whole, without an array per call
      return capture.destroy(this, destroy, arguments as unknown as unknown[]);
    } as typeof res.destroy;
    res.write = function (this: ServerResponse) {
      // biome-ignore lint/complexity/noArguments: forwarded whole, without an array per call
      return capture.write(this, write, arguments as unknown as unknown[]);
    } as typeof res.write;
    res.end = function (this: ServerResponse) {
      // biome-ignore lint/complexity/noArguments: forwarded whole, without an array per call
      return capture.end(this, end, arguments as unknown as unknown[]);
    } as typeof res.end;
  }

  /** `true` when this captures `res`. */
  isFor(res: ServerResponse): boolean {
    return this.#res === res;
  }

  writeHead(res: ServerResponse, writeHead: Method, passed: unknown[]): unknown {
    // Only the head that goes out counts: a framework's late error answer (writeHead(500) on a response
    // already under way) throws and changes nothing.
    const first = !res.headersSent;
    // Most heads pass only a status (Node's own implicit head does): nothing else to read then.
    const headers = first && passed.length > 1 ? headHeadersOf(passed) : undefined;
    if (first && !this.#headPassed) {
      // Read before passing the head on: a compression layer inside this one sets Content-Encoding as the
      // head goes through it, for bytes that pass here still plain.
      this.#headPassed = true;
      this.#headEncoding =
        headerText(headers?.['content-encoding']) ?? headerText(res.getHeader('content-encoding'));
    }
    const result = writeHead.apply(res, passed);
    if (first) {
      if (typeof passed[0] === 'number') this.#sentStatus = passed[0];
      if (headers !== undefined) Object.assign(this.#headHeaders, headers);
    }
    return result;
  }

  destroy(res: ServerResponse, destroy: Method, passed: unknown[]): unknown {
    // Node does not destroy a response when its client leaves; server code that does so while the
    // connection is still open is breaking the answer off. After the client left, before any status, it
    // breaks off the answer that was still to come: there will be none.
    if (!this.ended) {
      if (res.socket !== null && res.socket?.destroyed === false) this.brokenOff = true;
      else if (!res.headersSent) this.#owner.brokenOffAfterLeaving();
    }
    return destroy.apply(res, passed);
  }

  /** The client left before any status: tell the owner of the next write, the handler's answer beginning. */
  awaitAnswer(): void {
    this.#awaitingAnswer = true;
  }

  write(res: ServerResponse, write: Method, passed: unknown[]): unknown {
    if (!this.#inEnd) this.#keep(passed[0] as Chunk, passed[1]);
    if (this.#awaitingAnswer) {
      this.#awaitingAnswer = false;
      this.#owner.wroteAfterLeaving();
    }
    return write.apply(res, passed);
  }

  end(res: ServerResponse, end: Method, passed: unknown[]): unknown {
    const chunk = passed[0];
    if (typeof chunk !== 'function') this.#keep(chunk as Chunk, passed[1]);
    // An `end` that writes its chunk through `this.write` (light-my-request's does) is counted once.
    this.#inEnd = true;
    let result: unknown;
    try {
      result = end.apply(res, passed);
    } finally {
      this.#inEnd = false;
    }
    // An `end` after server code broke the response off (a framework's error handler closing it) writes
    // nothing: the response did not end.
    if (!this.ended && !this.brokenOff) {
      this.ended = true;
      this.#owner.ended();
    }
    return result;
  }

  #keep(chunk: Chunk, encoding: unknown): void {
    const buffer = toBuffer(chunk, encoding);
    if (buffer === undefined || buffer.length === 0) return;
    if (this.#chunks.length === 0) this.#madeHere = typeof chunk === 'string';
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

  /** The status as it went out, or as it stands. */
  get status(): number {
    return this.#sentStatus ?? this.#res.statusCode;
  }

  /**
   * The response as written so far, with the headers named in `stored` (lower-case: the execution's
   * `storedHeaders`, read by name, not every header copied); `incomplete` marks a body that will never be whole.
   */
  snapshot(incomplete: boolean, stored: ReadonlySet<string>): CapturedResponse {
    const truncated = this.#truncated || incomplete;
    const res = this.#res;
    const headers: Record<string, HeaderValue> = Object.create(null);
    for (const name of stored) {
      // As the response holds it (a `null` too: Node sends it as "null"), else as a head handed straight to
      // writeHead passed it.
      const held = res.getHeader(name);
      const value = held !== undefined ? held : this.#headHeaders[name];
      if (value !== undefined) headers[name] = value;
    }
    const chunks = this.#chunks;
    // A copy, never the app's own buffer: it may reuse it once the response is out. A body written as one
    // string is a copy already (its bytes were made here).
    const body = truncated ? null : chunks.length === 1 && this.#madeHere ? chunks[0] : Buffer.concat(chunks);
    return {
      status: this.status,
      headers,
      body,
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
 * - the response ends (the handler called `end`) → `finish` with it, at once: stored or released by its status,
 *   even when the client has gone by then, because the work is done;
 * - the connection closes after the status was sent but before the end → `finish` with the status and no
 *   body (a body cut short is never stored; the replay says it was omitted);
 * - the server breaks the response off before any status (a failed stream piped with `pipeline`, a
 *   `res.destroy()` while the connection is open) → `abort`: the key is released;
 * - the client leaves before any status → nothing is decided yet when the handler is still running (under its
 *   renewed lease): its answer settles the key when it comes. An `end` is stored as above; a stream piped
 *   into the response (`stream.pipeline(readable, res)`, `readable.pipe(res)`), whether it began before the
 *   client left or after, or a body written, can no longer be written whole, so it settles the key at once
 *   with its status and no body; a `res.destroy()` without any answer releases it. (The coordinator's
 *   `maxExecutionMs` bounds a handler that never answers.)
 *
 * A framework that hands every answer over whole before writing it (Fastify's `onSend`) settles by that instead
 * ({@link settleHandedOver}), and comes here only for what it does not hand over.
 *
 * `finish` never throws, so nothing here can reject unhandled.
 *
 * @param options.bodyUnseen bytes of the body may have been written before this call: the body is not stored
 * (the replay says it was omitted), the status and headers are
 * @param options.answered the handler's answer is already given (its framework took a stream from it to write):
 * a connection that closes before any status settles the key at once with its status and no body, since
 * nothing else will be written
 */
export function settleOnResponse(
  execution: Execution,
  res: ServerResponse,
  options: { readonly bodyUnseen?: boolean; readonly answered?: boolean } = {},
): void {
  new Settlement(execution, res, options.bodyUnseen === true, options.answered === true);
}

/**
 * The settlement of one execution by its response. A class, like everything made per request here: an object
 * literal holding closures over the request would be built at an allocation site that the engine may come
 * to allocate in the old generation, where it keeps every request it points to alive past the young
 * collections.
 */
class Settlement implements CaptureOwner {
  readonly #execution: Execution;
  readonly #res: ServerResponse;
  readonly #capture: ResponseCapture;
  /** The handler's answer was handed over before the capture began (a stream its framework writes). */
  readonly #answered: boolean;
  #settled = false;
  /** How the response closed has been looked at. */
  #closeSeen = false;

  constructor(execution: Execution, res: ServerResponse, bodyUnseen: boolean, answered: boolean) {
    this.#execution = execution;
    this.#res = res;
    this.#answered = answered;
    this.#capture = new ResponseCapture(res, execution.maxBodyBytes, this, bodyUnseen);
    // One listener: a response that ends is settled by its `end` (below); the close says how any other ended.
    res.on('close', () => this.#closed());
    // A capture that begins after the connection closed (a framework's, for a reply hijacked then) waits for no
    // close: it has come already.
    if (isConnectionGone(res)) this.#closed();
  }

  /**
   * Called by the capture right after `end`: the answer is complete as the app wrote it, and settled now, even
   * if the client has left by then (the work is done).
   */
  ended(): void {
    this.#settle(false);
  }

  /** Called by the capture: server code destroyed the response after its client left, before any status. */
  brokenOffAfterLeaving(): void {
    this.#abort();
  }

  /**
   * Called by the capture: the handler began to write its answer after its client left, before any status.
   * Its bytes go nowhere, and a stream written so may never end (`stream.pipeline` writes a web stream or a
   * generator's output itself, once, then gives up): settled with the status and no body, unless the answer
   * ends at once (a `write` and an `end` in one go is stored whole).
   */
  wroteAfterLeaving(): void {
    queueMicrotask(() => this.#settle(true));
  }

  #settle(incomplete: boolean): void {
    if (this.#settled) return;
    this.#settled = true;
    // An answer with no body (1xx, 204, 304, an answer to HEAD) misses nothing when it is cut short.
    const status = this.#capture.status;
    const bodiless = status < 200 || status === 204 || status === 304 || this.#execution.method === 'HEAD';
    void this.#execution.finish(
      this.#capture.snapshot(incomplete && !bodiless, this.#execution.storedHeaders),
    );
  }

  #abort(): void {
    if (this.#settled) return;
    this.#settled = true;
    void this.#execution.abort();
  }

  #closed(): void {
    if (this.#closeSeen) return;
    this.#closeSeen = true;
    const res = this.#res;
    const capture = this.#capture;
    if (capture.ended) this.#settle(false);
    else if (res.headersSent) this.#settle(true);
    else if (capture.brokenOff || (res.errored !== null && res.errored !== undefined)) this.#abort();
    // The client left before any status. An answer already given (a stream handed over, or piped in) can no
    // longer be written: the work is done, its status is known, its body never went out.
    else if (this.#answered || isPipedInto(res)) this.#settle(true);
    // Otherwise the handler is still running: its answer settles the key when it comes: an `end`, a destroy,
    // a stream piped into the response (told by the `pipe` it emits), or a first write.
    else if (!this.#settled) {
      capture.awaitAnswer();
      res.once('pipe', () => this.#settle(true));
    }
  }
}
