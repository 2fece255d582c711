import { abortReason, attemptSignal } from './abort.js';

/** What every attempt of one call sends, built once from the caller's `input` and `init`. */
export interface RequestTemplate {
  /** The caller's input as given: a URL string, a `URL`, or their `Request` (whose body is never consumed while the call can be retried). */
  readonly input: string | URL | Request;
  readonly url: string;
  /** The method as the caller wrote it (fetch normalizes its case). */
  readonly method: string;
  /** The headers of every attempt: the caller's, to which the key is added. */
  readonly headers: Headers;
  /** Everything else the caller's init said (credentials, redirect, …), and the body to send. */
  readonly init: RequestInit;
  /** `false` when the body could only be sent once (a stream or `FormData` longer than `maxBufferBytes`). */
  readonly replayable: boolean;
  readonly signal: AbortSignal | undefined;
}

/** A request body fetch accepts (`BodyInit`, which Node's types do not declare globally). */
type Body = NonNullable<RequestInit['body']>;

/** Pulls the chunks of a one-shot body, whatever kind it is. */
interface ChunkSource {
  next(): Promise<IteratorResult<unknown>>;
  cancel(reason?: unknown): Promise<void>;
}

// Duck-typed rather than `instanceof`: a Request, stream or Blob from another realm or another fetch
// implementation (undici's own export) is still one.
export const isRequest = (value: unknown): value is Request =>
  typeof value === 'object' &&
  value !== null &&
  typeof (value as Request).url === 'string' &&
  typeof (value as Request).method === 'string' &&
  typeof (value as Request).clone === 'function';

const isReadableStream = (value: unknown): value is ReadableStream<unknown> =>
  typeof value === 'object' && value !== null && typeof (value as ReadableStream).getReader === 'function';

/**
 * A `FormData`, by its tag: fetch accepts one from another implementation too. fetch encodes it afresh on
 * every call, with a new random boundary: the same form is other bytes (and another content type) on each
 * attempt, which the server sees as another request with the same key. It is encoded once instead.
 */
const isFormData = (value: unknown): value is FormData =>
  Object.prototype.toString.call(value) === '[object FormData]';

/** Bodies fetch reads afresh, to the same bytes, on every call: they can be sent again as they are. */
function isReplayableBody(body: unknown): boolean {
  return (
    typeof body === 'string' ||
    body instanceof ArrayBuffer ||
    ArrayBuffer.isView(body) ||
    body instanceof URLSearchParams ||
    (typeof Blob !== 'undefined' && body instanceof Blob)
  );
}

/**
 * A stream or an async iterable (a Node `Readable`, an async generator): read once, gone. A sync iterable (an
 * array, a generator) is not one: fetch writes it as its string (`['a', 'b']` as `a,b`), and so does every
 * attempt of ours, the same each time.
 */
function isOneShotBody(body: unknown): body is object {
  if (typeof body !== 'object' || body === null || isReplayableBody(body) || isFormData(body)) return false;
  return isReadableStream(body) || Symbol.asyncIterator in body;
}

function chunkSource(body: object): ChunkSource {
  if (isReadableStream(body)) {
    const reader = body.getReader();
    return { next: () => reader.read() as Promise<IteratorResult<unknown>>, cancel: (r) => reader.cancel(r) };
  }
  const iterator = (body as AsyncIterable<unknown>)[Symbol.asyncIterator]();
  return {
    next: async () => iterator.next(),
    cancel: async () => {
      await iterator.return?.();
    },
  };
}

const encoder = new TextEncoder();

function bytesOf(chunk: unknown): Uint8Array {
  if (chunk instanceof Uint8Array) return chunk;
  if (typeof chunk === 'string') return encoder.encode(chunk);
  if (ArrayBuffer.isView(chunk)) return new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength);
  if (chunk instanceof ArrayBuffer) return new Uint8Array(chunk);
  throw new TypeError(`a request body chunk must be bytes or text, got ${typeof chunk}`);
}

function concat(chunks: readonly Uint8Array[], length: number): Uint8Array {
  const bytes = new Uint8Array(length);
  let at = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, at);
    at += chunk.byteLength;
  }
  return bytes;
}

type Buffered =
  | { readonly kind: 'bytes'; readonly bytes: Uint8Array }
  /** Over the limit: the chunks read so far, then the rest of the source, as one stream to send once. */
  | { readonly kind: 'too-long'; readonly stream: ReadableStream<Uint8Array>; readonly source: ChunkSource };

/**
 * The next chunk of `source`, or, as soon as `signal` aborts, a rejection with its reason, as fetch rejects
 * (the source is cancelled then, as fetch cancels a body it will not send).
 */
function nextChunk(source: ChunkSource, signal: AbortSignal | undefined): Promise<IteratorResult<unknown>> {
  if (signal === undefined) return source.next();
  return new Promise((resolve, reject) => {
    const onAbort = () => {
      const reason = abortReason(signal);
      // Not awaited: an async generator's return() waits for the read in progress, which may never end.
      source.cancel(reason).catch(() => {});
      reject(reason);
    };
    if (signal.aborted) {
      onAbort();
      return;
    }
    signal.addEventListener('abort', onAbort, { once: true });
    source.next().then(
      (result) => {
        signal.removeEventListener('abort', onAbort);
        resolve(result);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error);
      },
    );
  });
}

/**
 * Read a one-shot body into memory up to `limitBytes`, until `signal` aborts. A failing source or an abort
 * rejects: nothing was sent yet.
 */
async function buffer(
  source: ChunkSource,
  limitBytes: number,
  signal: AbortSignal | undefined,
): Promise<Buffered> {
  const chunks: Uint8Array[] = [];
  let length = 0;
  for (;;) {
    const { done, value } = await nextChunk(source, signal);
    if (done) return { kind: 'bytes', bytes: concat(chunks, length) };
    let chunk: Uint8Array;
    try {
      chunk = bytesOf(value);
    } catch (error) {
      source.cancel(error).catch(() => {});
      throw error;
    }
    chunks.push(chunk);
    length += chunk.byteLength;
    if (length > limitBytes) break;
  }
  const stream = new ReadableStream<Uint8Array>({
    start(controller) {
      for (const chunk of chunks) controller.enqueue(chunk);
    },
    async pull(controller) {
      const { done, value } = await source.next();
      if (done) controller.close();
      else controller.enqueue(bytesOf(value));
    },
    cancel: (reason) => source.cancel(reason),
  });
  return { kind: 'too-long', stream, source };
}

/** Buffer a call's body, until the caller's signal aborts or `timeoutMs` has passed. */
async function bufferWithin(
  source: ChunkSource,
  limits: BufferLimits,
  signal: AbortSignal | undefined,
): Promise<Buffered> {
  const guard = attemptSignal(signal, limits.timeoutMs, 'Reading the request body');
  try {
    return await buffer(source, limits.maxBufferBytes, guard.signal);
  } finally {
    guard.clearTimeout();
  }
}

/** Cancel a one-shot body that will not be read, as fetch does when it rejects before sending it. */
export function discardBody(body: unknown, reason: unknown): void {
  if (!isOneShotBody(body)) return;
  try {
    chunkSource(body)
      .cancel(reason)
      .catch(() => {});
  } catch {
    // Locked or already read: it is not ours to cancel.
  }
}

/**
 * A private copy of a mutable body, so that a caller who reuses their buffer or their `URLSearchParams`
 * cannot change a retry's body.
 */
function copied(body: Body): Body {
  if (body instanceof ArrayBuffer) return body.slice(0);
  if (ArrayBuffer.isView(body)) return new Uint8Array(body.buffer, body.byteOffset, body.byteLength).slice();
  if (body instanceof URLSearchParams) return new URLSearchParams(body);
  return body;
}

/** How the one-shot body of a call is read into memory: up to how many bytes, and until when. */
export interface BufferLimits {
  readonly maxBufferBytes: number;
  /** Reading the body is abandoned after this long (with a `TimeoutError`), as an attempt is. */
  readonly timeoutMs: number | undefined;
}

/**
 * Build the template of a call's attempts, as fetch itself would read `input` and `init` (init wins). A
 * one-shot body is buffered here, up to `maxBufferBytes`, and so is the encoding of a `FormData` (so that
 * every attempt sends the same bytes under the same boundary); a caller's `Request` is read through a clone,
 * so they can use it again. Buffering ends when the call's signal aborts, or after `timeoutMs`: the call then
 * rejects with the signal's reason, or the `TimeoutError`, and the body is cancelled. The result is checked by
 * building a `Request` from it: a malformed request (invalid URL or header, a GET with a body) is thrown here
 * as fetch's own `TypeError` and never sent, so that a `TypeError` from an attempt can only mean a network
 * error.
 */
export async function buildTemplate(
  input: string | URL | Request,
  init: RequestInit | undefined,
  limits: BufferLimits,
): Promise<RequestTemplate> {
  const request = isRequest(input) ? input : undefined;
  const {
    body: initBody,
    headers: initHeaders,
    method: initMethod,
    signal: initSignal,
    ...rest
  } = init ?? {};
  const method = initMethod ?? request?.method ?? 'GET';
  const headers = new Headers(initHeaders ?? request?.headers);
  const signal = callSignal(input, init);
  if (signal?.aborted) {
    discardBody(initBody, abortReason(signal));
    throw abortReason(signal);
  }
  let body: Body | undefined;
  let replayable = true;
  let probe: Body | undefined;
  if (initBody !== undefined && initBody !== null) {
    let source: ChunkSource | undefined;
    if (isFormData(initBody)) {
      // Encoded once: its bytes and the content type that names their boundary (the caller's own content type
      // wins, as in fetch).
      const encoded = new Response(initBody);
      const contentType = encoded.headers.get('content-type');
      if (contentType !== null && !headers.has('content-type')) headers.set('content-type', contentType);
      source = chunkSource(encoded.body as ReadableStream<Uint8Array>);
    } else if (isOneShotBody(initBody)) source = chunkSource(initBody);
    if (source !== undefined) {
      const buffered = await bufferWithin(source, limits, signal);
      replayable = buffered.kind === 'bytes';
      body = buffered.kind === 'bytes' ? buffered.bytes : buffered.stream;
      probe = new Uint8Array(0);
    } else {
      body = copied(initBody);
      probe = body;
    }
  } else if (request?.body) {
    const source = chunkSource(request.clone().body as ReadableStream<Uint8Array>);
    const buffered = await bufferWithin(source, limits, signal);
    if (buffered.kind === 'bytes') body = buffered.bytes;
    else {
      // Too long to keep: the caller's Request goes once with its own body (the clone's copy is dropped;
      // not awaited: cancelling one branch of a teed body settles only when the other branch ends too).
      replayable = false;
      buffered.source.cancel().catch(() => {});
    }
    // A body in the init, so that building the probe does not consume the caller's Request.
    probe = new Uint8Array(0);
  }
  const attemptInit: RequestInit = {
    ...rest,
    method,
    headers,
    ...(body === undefined ? {} : { body }),
    // Node's fetch sends a stream body only when told it is half duplex.
    ...(isReadableStream(body) ? { duplex: 'half' } : {}),
  };
  new Request(input, probe === undefined ? attemptInit : { ...attemptInit, body: probe });
  return {
    input,
    url: request?.url ?? String(input),
    method,
    headers,
    init: attemptInit,
    replayable,
    signal,
  };
}

/** The signal of a call, as fetch reads it: an init signal of null means none; an absent one leaves the Request's. */
export function callSignal(
  input: string | URL | Request,
  init: RequestInit | undefined,
): AbortSignal | undefined {
  const request = isRequest(input) ? input : undefined;
  return init?.signal === undefined ? request?.signal : (init.signal ?? undefined);
}
