import type { CapturedResponse, Execution } from '@idem/core';

const encoder = new TextEncoder();

/** The bytes of a body as they pass, up to a cap: past it only that it was too large is kept. */
class BodyCapture {
  readonly #maxBytes: number;
  readonly #chunks: Uint8Array[] = [];
  #size = 0;
  truncated = false;

  constructor(maxBytes: number) {
    this.#maxBytes = maxBytes;
  }

  keep(chunk: unknown): void {
    if (this.truncated) return;
    // A body stream yields bytes; a string from a lax runtime is kept as the UTF-8 it is sent as.
    const bytes = typeof chunk === 'string' ? encoder.encode(chunk) : chunk;
    if (!(bytes instanceof Uint8Array)) {
      this.truncated = true; // not bytes: nothing that could be stored as what was sent
      return;
    }
    this.#size += bytes.byteLength;
    if (this.#size > this.#maxBytes) {
      this.truncated = true;
      this.#chunks.length = 0;
      return;
    }
    // A copy (never a view, as `Buffer#slice` is): the producer may reuse its buffer once the chunk is read.
    this.#chunks.push(Uint8Array.prototype.slice.call(bytes));
  }

  bytes(): Uint8Array {
    if (this.#chunks.length === 1) return this.#chunks[0] as Uint8Array;
    const whole = new Uint8Array(this.#size);
    let at = 0;
    for (const chunk of this.#chunks) {
      whole.set(chunk, at);
      at += chunk.byteLength;
    }
    return whole;
  }
}

/**
 * The body of a response that its runtime keeps whole, when it is known without reading a stream: the
 * lightweight `Response` of `@hono/node-server` keeps `[status, body, headers]` under a symbol named `cache`
 * while nothing has read it (reading the body of one builds a whole Web `Response` and its streams, several
 * times the cost of the request on Node.js 20). `undefined` otherwise: the body is then teed.
 */
function wholeBodyOf(response: Response): string | Uint8Array | null | undefined {
  for (const symbol of Object.getOwnPropertySymbols(response)) {
    if (symbol.description !== 'cache') continue;
    const kept: unknown = (response as unknown as Record<symbol, unknown>)[symbol];
    if (!Array.isArray(kept) || kept[0] !== response.status) return undefined;
    const body: unknown = kept[1];
    if (body === null || typeof body === 'string' || body instanceof Uint8Array) return body;
  }
  return undefined;
}

/** A `Headers` as the record a capture holds (lower-case names; repeated values joined as `Headers` does). */
function recordOf(headers: Headers): Record<string, string> {
  const record: Record<string, string> = {};
  headers.forEach((value, name) => {
    record[name] = value;
  });
  return record;
}

/**
 * Settle an execution by the `Response` its handler answered with, and return the response to send in its
 * place: the same status, headers and body. A body the runtime keeps whole (a string or bytes) is stored as it
 * is and the response goes out untouched. Any other body is passed through as it is read: read ahead, as fast
 * as it comes, until it has ended or outgrown `execution.maxBodyBytes` (so an answer nobody reads settles too,
 * and no more than the cap waits in memory), then as fast as it is sent. Then:
 *
 * - no body, or the body read to its end within the cap → `finish` with the answer: stored or released by its
 *   status;
 * - the body fails before its first chunk → `abort`: nothing of it was sent, the key is released (a retry runs
 *   again);
 * - the body fails after a chunk, grows past the cap, or the client leaves before it ended (the server cancels
 *   it, and so its source) → `finish` with the status and no body (`bodyOmitted`): the work happened, the body
 *   is incomplete or too large to keep;
 * - the client had left before the handler answered (`signal` aborted) → `finish` with the status and no body
 *   (`bodyOmitted`), the body cancelled unread: it can no longer go out whole, and nobody would read it (a
 *   stream that never ends would hold the key for ever). A body the runtime keeps whole is stored as above.
 *
 * @param signal the request's signal: aborted when the client has left
 * @example
 * return settleWebResponse(result.execution, await handler(request), request.signal);
 */
export function settleWebResponse(execution: Execution, response: Response, signal?: AbortSignal): Response {
  const status = response.status;
  const headers = recordOf(response.headers);
  const contentEncoding = response.headers.get('content-encoding') ?? undefined;
  const finish = (body: Uint8Array | null, bodyTruncated: boolean): void => {
    const captured: CapturedResponse = { status, headers, body, bodyTruncated, contentEncoding };
    void execution.finish(captured); // never throws
  };
  const whole = wholeBodyOf(response);
  if (whole !== undefined) {
    const bytes = typeof whole === 'string' ? encoder.encode(whole) : whole;
    if (bytes !== null && bytes.byteLength > execution.maxBodyBytes) finish(null, true);
    else finish(bytes === null ? null : Uint8Array.prototype.slice.call(bytes), false); // a copy, not a view
    return response; // untouched: the server writes it as it would have
  }
  const { body } = response;
  if (body === null) {
    finish(null, false);
    return response;
  }
  const source = body.getReader(); // throws for a body already read: the caller aborts
  const capture = new BodyCapture(execution.maxBodyBytes);
  let settled = false;
  const settle = (outcome: 'whole' | 'cut' | 'broken'): void => {
    if (settled) return;
    settled = true;
    if (outcome === 'broken') void execution.abort();
    else if (outcome === 'cut' || capture.truncated) finish(null, true);
    else finish(capture.bytes(), false);
  };
  const init = { status, statusText: response.statusText, headers: response.headers };
  if (signal?.aborted) {
    // The client left before the answer, which can no longer go out whole: the status and no body (design.md,
    // the adapter contract). The body is not read: nobody will, and a stream that never ends (an event feed)
    // would hold the key in flight for ever. Cancelled, so that its source stops too.
    settle('cut');
    source.cancel().catch(() => {});
    return new Response(null, init);
  }
  let chunks = 0;
  let cancelled = false;
  let demand: (() => void) | undefined;
  const passed = new ReadableStream<Uint8Array>(
    {
      start(controller) {
        void (async () => {
          try {
            for (;;) {
              // Within the cap, read ahead; past it, read as the server asks (`pull`).
              if (capture.truncated) await new Promise<void>((resolve) => (demand = resolve));
              if (cancelled) return;
              const step = await source.read();
              if (cancelled) return;
              if (step.done) {
                settle('whole');
                controller.close();
                return;
              }
              chunks++;
              capture.keep(step.value);
              if (capture.truncated) settle('cut');
              controller.enqueue(step.value);
            }
          } catch (error) {
            settle(chunks === 0 ? 'broken' : 'cut');
            if (!cancelled) controller.error(error);
          }
        })();
      },
      pull() {
        demand?.();
        demand = undefined;
      },
      cancel(reason) {
        // The server stopped sending: its client left, or it broke the answer off. The source stops too.
        cancelled = true;
        settle('cut');
        demand?.();
        return source.cancel(reason);
      },
    },
    { highWaterMark: 0 },
  );
  return new Response(passed, init);
}
