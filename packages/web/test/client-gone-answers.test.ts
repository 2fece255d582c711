import type { IdempotencyStore } from '@idem/core';
import { createMemoryStore } from '@idem/store-memory';
import { withIdempotency } from '@idem/web';
import { v7 } from 'uuid';
import { describe, expect, test } from 'vitest';

// The client leaves while the handler runs; then the handler answers with a stream. design.md, "The adapter
// contract": "the client leaves before any status, while the handler runs | ... its answer settles the key: an
// end as above, a stream piped into the response or a body written (which can no longer go out whole) with the
// status and no body". The stream is not read (nobody would, and one that never ends, an event feed, a tail,
// would hold the key in flight for ever under its renewed lease): it is cancelled, and its status stored.

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const encoder = new TextEncoder();

const post = (key: string, signal?: AbortSignal) =>
  new Request('https://api.example/events', {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': key },
    body: '{"topic":"orders"}',
    ...(signal ? { signal } : {}),
  });

interface Source {
  cancelled: boolean;
  pulls: number;
  stop: boolean;
}

/** Pulled only when read (not once ahead, as by default): what reads it shows in `pulls`. */
const NOT_AHEAD = { highWaterMark: 0 };

/** Streams the handler answers with, each counting its pulls and telling whether it was cancelled. */
const streams: Record<string, (source: Source) => ReadableStream<Uint8Array>> = {
  'a stream that never ends (an event feed)': (source) =>
    new ReadableStream(
      {
        async pull(controller) {
          source.pulls++;
          await sleep(10);
          if (source.stop) controller.close();
          else controller.enqueue(encoder.encode(': keep-alive\n\n'));
        },
        cancel() {
          source.cancelled = true;
        },
      },
      NOT_AHEAD,
    ),
  'a short stream': (source) => {
    const chunks = ['{"a":', '1}'];
    return new ReadableStream(
      {
        pull(controller) {
          source.pulls++;
          const chunk = chunks.shift();
          if (chunk === undefined) controller.close();
          else controller.enqueue(encoder.encode(chunk));
        },
        cancel() {
          source.cancelled = true;
        },
      },
      NOT_AHEAD,
    );
  },
  'a stream that would fail': (source) =>
    new ReadableStream(
      {
        pull(controller) {
          source.pulls++;
          controller.error(new Error('feed broke'));
        },
        cancel() {
          source.cancelled = true;
        },
      },
      NOT_AHEAD,
    ),
};

async function recordOf(store: IdempotencyStore, key: string) {
  const record = await store.load({ scope: '', key });
  if (record === undefined) return 'released';
  if (record.response === null) return 'in-flight';
  const { status, body, bodyOmitted } = record.response;
  return { status, body, bodyOmitted };
}

describe('the client left while the handler ran, and the handler answers with a stream', () => {
  for (const [name, make] of Object.entries(streams)) {
    test(`${name}: cancelled unread, its status stored with no body at once; the retry replays it`, async () => {
      const store = createMemoryStore({ sweepIntervalMs: false });
      const source: Source = { cancelled: false, pulls: 0, stop: false };
      let runs = 0;
      const handler = withIdempotency(
        async (request: Request) => {
          runs++;
          // Answers only once its client has gone (a slow handler whose client timed out).
          await new Promise((resolve) => request.signal.addEventListener('abort', resolve, { once: true }));
          return new Response(make(source), {
            status: 202,
            headers: { 'content-type': 'text/event-stream' },
          });
        },
        // A short lease: anything that still renews it after this long is holding the key for nobody.
        { store, leaseMs: 150, heartbeatIntervalMs: 50 },
      );
      const key = v7();
      const client = new AbortController();
      const answering = handler(post(key, client.signal));
      await sleep(20);
      client.abort();
      const answer = await answering;
      try {
        await sleep(20);
        const settled = await recordOf(store, key);
        await sleep(100); // (a feed still read would be pulled every 10 ms)
        const retry = await handler(post(key));
        expect({
          answer: [answer.status, answer.body],
          settled,
          cancelled: source.cancelled,
          pulls: source.pulls,
          retry: [retry.status, retry.headers.get('idempotent-replayed'), await retry.text()],
          runs,
        }).toEqual({
          answer: [202, null], // nobody is there to read it
          settled: { status: 202, body: null, bodyOmitted: true },
          cancelled: true,
          pulls: 0,
          retry: [202, 'true', ''],
          runs: 1,
        });
      } finally {
        source.stop = true;
      }
    });
  }
});
