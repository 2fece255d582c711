import type { FetchFunction } from '@idem/client';

/** One attempt as the fake fetch received it. */
export interface Sent {
  readonly url: string;
  readonly method: string;
  readonly headers: Headers;
  readonly body: string;
  readonly signal: AbortSignal | undefined;
}

/** What the fake fetch does for one attempt: answer, fail (a thrown value), or anything else async. */
export type Step = Response | Error | ((sent: Sent) => Response | Error | Promise<Response | Error>);

/**
 * A fetch that answers from a script, one step per attempt (the last step repeats), and records what each
 * attempt sent: method, headers and the body as the server would read it.
 */
export function scriptedFetch(...steps: Step[]) {
  const sent: Sent[] = [];
  const fetch: FetchFunction = async (input, init) => {
    // Read the attempt the way a server would: as one request, its body in full.
    const request = new Request(input, init);
    if (request.signal.aborted) throw request.signal.reason;
    const body = await request.text();
    const attempt: Sent = {
      url: request.url,
      method: request.method,
      headers: new Headers(request.headers),
      body,
      signal: init?.signal ?? undefined,
    };
    sent.push(attempt);
    const step = steps[Math.min(sent.length - 1, steps.length - 1)] as Step;
    const outcome = typeof step === 'function' ? await step(attempt) : step;
    if (outcome instanceof Error) throw outcome;
    // A Response can be read once: every repeat of the step gets a copy.
    return outcome.clone();
  };
  return { fetch, sent };
}

/** A network error as fetch reports it. */
export const networkError = () => new TypeError('fetch failed', { cause: new Error('ECONNRESET') });

export const answer = (
  status: number,
  body: unknown = { status },
  headers: Record<string, string> = {},
): Response =>
  new Response(body === null ? null : JSON.stringify(body), {
    status,
    headers: { 'content-type': 'application/json', ...headers },
  });

/** The idem coordinator's "in progress" answer. */
export const inProgress = (headers: Record<string, string> = {}): Response =>
  answer(409, { error: { code: 'IDEMPOTENCY_IN_PROGRESS', message: 'in flight' } }, headers);

/** Options that make retries immediate and deterministic. */
export const fast = { baseDelayMs: 0, maxDelayMs: 0, random: () => 0 } as const;

export const post = (body: unknown = { item: 'book' }): RequestInit => ({
  method: 'POST',
  headers: { 'content-type': 'application/json' },
  body: JSON.stringify(body),
});

export const ORDERS = 'http://127.0.0.1:9/orders';
