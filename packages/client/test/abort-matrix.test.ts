import type { IncomingMessage, ServerResponse } from 'node:http';
import { createIdempotentFetch, type FetchFunction, type IdempotentFetchOptions } from '@idem/client';
import { describe, expect, test } from 'vitest';
import { withHttpServer } from './support/http-server.js';

/** How long a call may take to reject once its signal aborted: far less than any wait or stall below. */
const PROMPT_MS = 200;

/** How `promise` settled within `ms`, or `'pending'`; the timer is cleared either way. */
async function settledWithin(promise: Promise<unknown>, ms: number) {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'pending'>((resolve) => {
    timer = setTimeout(() => resolve('pending'), ms);
  });
  try {
    return await Promise.race([
      promise.then(
        (value) => ({ resolved: value }),
        (error: unknown) => ({ rejected: error }),
      ),
      late,
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** Timers that keep the process alive (a backoff wait or an attempt timeout left behind would). */
const liveTimers = () => process.getActiveResourcesInfo().filter((kind) => kind === 'Timeout').length;

/** A request body, as fetch takes it (`BodyInit`, which Node's types do not declare globally). */
type Body = NonNullable<RequestInit['body']>;

const encoder = new TextEncoder();

/** A stream that gives one chunk and then stalls, recording why it was cancelled. */
function stallingStream() {
  const cancelled: unknown[] = [];
  let pulled!: () => void;
  const reached = new Promise<void>((resolve) => {
    pulled = resolve;
  });
  let pulls = 0;
  const stream = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (++pulls === 1) {
        controller.enqueue(encoder.encode('first chunk,'));
        return;
      }
      pulled();
      return new Promise<void>(() => {}); // never ends
    },
    cancel(reason) {
      cancelled.push(reason);
    },
  });
  return { stream, reached, cancelled };
}

/** An async iterable that gives one chunk and then stalls, recording whether it was closed. */
function stallingIterable() {
  let returned = false;
  let pulled!: () => void;
  const reached = new Promise<void>((resolve) => {
    pulled = resolve;
  });
  let nexts = 0;
  const iterable = {
    [Symbol.asyncIterator]: () => ({
      next: () => {
        if (++nexts === 1) return Promise.resolve({ done: false, value: encoder.encode('first,') });
        pulled();
        return new Promise<IteratorResult<Uint8Array>>(() => {});
      },
      return: () => {
        returned = true;
        return Promise.resolve({ done: true, value: undefined });
      },
    }),
  };
  return { iterable: iterable as unknown as Body, reached, returned: () => returned };
}

interface Server {
  readonly url: string;
  /** Resolves once the server received a request (whatever it then does with it). */
  readonly received: Promise<void>;
  readonly requests: () => number;
}

interface Started {
  /** Resolves once the call is at the point where the test aborts it. */
  readonly reached: Promise<unknown>;
  /** What must reject with the abort's reason (the call, or the read of its answer's body). */
  readonly outcome: Promise<unknown>;
  /** Checks once it did: what was sent, what was cancelled. */
  readonly after?: (reason: unknown, server: Server) => void;
}

interface AbortPoint {
  readonly name: string;
  /**
   * The rejection is fetch's own, not the client's (the caller reads the body of the answer they were given):
   * Node's fetch rejects a body read with an AbortError for a falsy reason (`null`), not with the reason.
   */
  readonly byFetch?: boolean;
  /** The signal is aborted before the call starts. */
  readonly alreadyAborted?: boolean;
  /** What the server does with each request (it may leave it unanswered). */
  readonly serve?: (req: IncomingMessage, res: ServerResponse) => void;
  readonly start: (
    idempotentFetch: (options?: IdempotentFetchOptions) => ReturnType<typeof createIdempotentFetch>,
    signal: AbortSignal,
    server: Server,
  ) => Started;
}

const post = (signal: AbortSignal, body: Body = '{"item":"book"}'): RequestInit =>
  ({
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body,
    signal,
    duplex: 'half',
  }) as RequestInit;

const points: AbortPoint[] = [
  {
    name: 'before sending (the signal is already aborted), a stream body',
    alreadyAborted: true,
    start: (client, signal, server) => {
      const { stream, cancelled } = stallingStream();
      return {
        reached: Promise.resolve(),
        outcome: client()(`${server.url}/orders`, post(signal, stream)),
        after: (reason) => {
          expect(server.requests()).toBe(0);
          expect(cancelled).toHaveLength(1); // fetch cancels a body it will not send; so does the client
          expect(cancelled[0]).toBe(reason);
        },
      };
    },
  },
  {
    name: 'before sending (the signal is already aborted), a Request',
    alreadyAborted: true,
    start: (client, signal, server) => {
      const request = new Request(`${server.url}/orders`, { method: 'PUT', body: 'x', signal });
      return {
        reached: Promise.resolve(),
        outcome: client()(request),
        after: () => expect(server.requests()).toBe(0),
      };
    },
  },
  {
    name: 'while buffering a ReadableStream that stalls',
    start: (client, signal, server) => {
      const { stream, reached, cancelled } = stallingStream();
      return {
        reached,
        outcome: client()(`${server.url}/orders`, post(signal, stream)),
        after: (reason) => {
          expect(server.requests()).toBe(0);
          expect(cancelled).toEqual([reason]);
        },
      };
    },
  },
  {
    name: 'while buffering an async iterable that stalls',
    start: (client, signal, server) => {
      const { iterable, reached, returned } = stallingIterable();
      return {
        reached,
        outcome: client()(`${server.url}/orders`, post(signal, iterable)),
        after: () => {
          expect(server.requests()).toBe(0);
          expect(returned()).toBe(true);
        },
      };
    },
  },
  {
    name: "while buffering a Request's body that stalls",
    start: (client, signal, server) => {
      const { stream, reached } = stallingStream();
      const request = new Request(`${server.url}/orders`, {
        method: 'POST',
        body: stream,
        duplex: 'half',
        signal,
      } as RequestInit);
      return { reached, outcome: client()(request), after: () => expect(server.requests()).toBe(0) };
    },
  },
  {
    name: 'while the key lifetime is read from a catalog that does not answer, a stream body',
    serve: () => {}, // /v1/config never answers
    start: (client, signal, server) => {
      const { stream, cancelled } = stallingStream();
      return {
        reached: server.received,
        outcome: client({ discoverKeyLifetime: server.url })(`${server.url}/orders`, post(signal, stream)),
        after: (reason) => {
          expect(server.requests()).toBe(1); // the config read, never the mutation
          expect(cancelled).toEqual([reason]);
        },
      };
    },
  },
  {
    name: 'while an attempt waits for its answer',
    serve: () => {}, // never answers
    start: (client, signal, server) => ({
      reached: server.received,
      outcome: client()(`${server.url}/orders`, post(signal)),
      after: () => expect(server.requests()).toBe(1),
    }),
  },
  {
    name: 'during the backoff wait between attempts',
    serve: (_req, res) => {
      res.writeHead(503, { 'retry-after': '30' }).end();
    },
    start: (client, signal, server) => {
      let retrying!: () => void;
      const reached = new Promise<void>((resolve) => {
        retrying = resolve;
      });
      return {
        reached,
        outcome: client({ onRetry: () => retrying() })(`${server.url}/orders`, post(signal)),
        after: () => expect(server.requests()).toBe(1),
      };
    },
  },
  {
    name: 'while the client reads a 409 to tell whether it is "in progress", its body stalling',
    serve: (_req, res) => {
      res.writeHead(409, { 'content-type': 'application/json' });
      res.write('{"error":');
    },
    start: (client, signal, server) => {
      // The global fetch, telling when the answer's head is in: the client is reading its body then.
      let headersIn!: () => void;
      const reached = new Promise<void>((resolve) => {
        headersIn = resolve;
      });
      const fetchThenTell: FetchFunction = async (input, init) => {
        const response = await fetch(input, init);
        headersIn();
        return response;
      };
      return {
        reached,
        outcome: client({ fetch: fetchThenTell })(`${server.url}/orders`, post(signal)),
        after: () => expect(server.requests()).toBe(1),
      };
    },
  },
  {
    name: "while the caller reads the answer's body, stalling",
    byFetch: true,
    serve: (_req, res) => {
      res.writeHead(201, { 'content-type': 'application/json' });
      res.write('{"id":');
    },
    start: (client, signal, server) => {
      const response = client()(`${server.url}/orders`, post(signal));
      return {
        reached: response,
        outcome: response.then((answer) => answer.text()),
        after: () => expect(server.requests()).toBe(1),
      };
    },
  },
];

const reasons: [string, () => unknown][] = [
  ['an Error', () => new Error('the caller left')],
  ['a string, not an Error', () => 'the caller left'],
  ['a plain object', () => ({ code: 'LEFT' })],
  ['null', () => null],
  ['no reason (an AbortError)', () => undefined],
];

const optionSets: [string, IdempotentFetchOptions][] = [
  ['', {}],
  [', with attemptTimeoutMs', { attemptTimeoutMs: 5_000 }],
];

describe.each(optionSets)(
  'an abort ends the call at once, with its reason, at every point%s',
  (_, options) => {
    describe.each(reasons)('reason: %s', (_reason, makeReason) => {
      test.each(points)('$name', async (point) => {
        let requests = 0;
        let received!: () => void;
        const receivedOnce = new Promise<void>((resolve) => {
          received = resolve;
        });
        await withHttpServer(
          (req, res) => {
            requests++;
            received();
            if (point.serve) point.serve(req, res);
            else res.writeHead(201, { 'content-type': 'application/json' }).end('{}');
          },
          async (url) => {
            const timersBefore = liveTimers();
            const controller = new AbortController();
            const reason = makeReason();
            const server: Server = { url, received: receivedOnce, requests: () => requests };
            const client = (more: IdempotentFetchOptions = {}) =>
              createIdempotentFetch({
                baseDelayMs: 10_000,
                maxDelayMs: 10_000,
                random: () => 1,
                ...options,
                ...more,
              });
            if (point.alreadyAborted) controller.abort(reason);
            const started = point.start(client, controller.signal, server);
            await started.reached;
            if (!point.alreadyAborted) controller.abort(reason);
            const settled = await settledWithin(started.outcome, PROMPT_MS);
            expect(settled).not.toBe('pending');
            expect(settled).toHaveProperty('rejected');
            const error = (settled as { rejected: unknown }).rejected;
            if (reason === undefined || (point.byFetch && !reason)) {
              expect(error).toMatchObject({ name: 'AbortError' });
            } else expect(error).toBe(reason);
            if (!point.byFetch) expect(error).toBe(controller.signal.reason);
            started.after?.(controller.signal.reason, server);
            expect(liveTimers()).toBeLessThanOrEqual(timersBefore);
          },
        );
      });
    });
  },
);
