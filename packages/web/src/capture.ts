import type { CapturedResponse, Execution } from '@idem/core';

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
    const bytes = typeof chunk === 'string' ? new TextEncoder().encode(chunk) : chunk;
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
    // A copy: the stream's producer may reuse its buffer once the chunk is read.
    this.#chunks.push(bytes.slice());
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
 * place: the same status, headers and body. The body is teed: one branch goes out, the other is read here as
 * fast as it comes, up to `execution.maxBodyBytes`, whether or not anyone reads the first. Then:
 *
 * - no body, or the body read to its end → `finish` with the answer: stored or released by its status. A
 *   client that left meanwhile changes nothing: the handler answered, and its answer is whole;
 * - the body stream fails before its first chunk → `abort`: nothing of the answer was sent, the key is released
 *   (a retry runs again);
 * - the body stream fails after a chunk, or grows past the cap → `finish` with the status and no body
 *   (`bodyOmitted`): the work happened, the body is incomplete or too large to keep. Past the cap this branch
 *   is cancelled; the other one goes on as the client reads it.
 *
 * @example
 * return settleWebResponse(result.execution, await handler(request));
 */
export function settleWebResponse(execution: Execution, response: Response): Response {
  const status = response.status;
  const headers = recordOf(response.headers);
  const contentEncoding = response.headers.get('content-encoding') ?? undefined;
  const finish = (body: Uint8Array | null, bodyTruncated: boolean): void => {
    const captured: CapturedResponse = { status, headers, body, bodyTruncated, contentEncoding };
    void execution.finish(captured); // never throws
  };
  const whole = wholeBodyOf(response);
  if (whole !== undefined) {
    const bytes = typeof whole === 'string' ? new TextEncoder().encode(whole) : whole;
    if (bytes !== null && bytes.byteLength > execution.maxBodyBytes) finish(null, true);
    else finish(bytes === null ? null : bytes.slice(), false); // a copy: the app may reuse its buffer
    return response; // untouched: the server writes it as it would have
  }
  if (response.body === null) {
    finish(null, false);
    return response;
  }
  const [sent, kept] = response.body.tee();
  const capture = new BodyCapture(execution.maxBodyBytes);
  void read(kept.getReader(), capture).then((outcome) => {
    if (outcome === 'broken') void execution.abort();
    else if (outcome === 'cut') finish(null, true);
    else finish(capture.bytes(), false);
  });
  return new Response(sent, { status, statusText: response.statusText, headers: response.headers });
}

/**
 * Read the kept branch of a body to its end, up to the cap: `whole` once read to its end within it, `cut` past
 * the cap (the branch is cancelled) or when it fails after a chunk, `broken` when it fails before any.
 */
async function read(
  source: ReadableStreamDefaultReader<Uint8Array>,
  capture: BodyCapture,
): Promise<'whole' | 'cut' | 'broken'> {
  let chunks = 0;
  try {
    for (;;) {
      const step = await source.read();
      if (step.done) return 'whole';
      chunks++;
      capture.keep(step.value);
      if (capture.truncated) {
        await source.cancel().catch(() => {});
        return 'cut';
      }
    }
  } catch {
    return chunks === 0 ? 'broken' : 'cut';
  }
}
