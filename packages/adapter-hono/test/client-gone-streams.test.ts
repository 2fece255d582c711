import { type IdempotencyEnv, idempotency } from '@idem/adapter-hono';
import type { IdempotencyStore } from '@idem/core';
import { createMemoryStore } from '@idem/store-memory';
import { type Context, Hono } from 'hono';
import { stream, streamSSE } from 'hono/streaming';
import { v7 } from 'uuid';
import { afterEach, describe, expect, test } from 'vitest';
import { listen } from './app.js';

// Over real HTTP (@hono/node-server): the client leaves while the handler runs, and the handler then answers
// with a stream. design.md, "The adapter contract": "the client leaves before any status, while the handler
// runs | ... its answer settles the key: an end as above, a stream piped into the response or a body written
// (which can no longer go out whole) with the status and no body". The stream is not read (one that never
// ends, an SSE feed, would hold the key in flight for ever under its renewed lease): it is cancelled, and its
// status is stored with no body.

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  while (closers.length > 0) await closers.pop()?.();
});

async function recordOf(store: IdempotencyStore, key: string) {
  const record = await store.load({ scope: '', key });
  if (record === undefined) return 'released';
  if (record.response === null) return 'in-flight';
  const { status, body, bodyOmitted } = record.response;
  return { status, body, bodyOmitted };
}

const keyed = (key: string, signal?: AbortSignal) => ({
  method: 'POST',
  headers: { 'content-type': 'application/json', 'idempotency-key': key },
  body: '{"topic":"orders"}',
  ...(signal ? { signal } : {}),
});

interface Feed {
  aborted: boolean;
  writes: number;
  stop: boolean;
}

/** Streaming answers, each counting its writes and telling whether it was aborted. */
const answers: Record<string, (c: Context, feed: Feed) => Response | Promise<Response>> = {
  'streamSSE that never ends': (c, feed) =>
    streamSSE(c, async (s) => {
      s.onAbort(() => {
        feed.aborted = true;
      });
      while (!feed.aborted && !feed.stop) {
        await s.writeSSE({ data: `tick ${feed.writes++}` });
        await s.sleep(10);
      }
    }),
  'stream() that writes a few chunks': (c, feed) =>
    stream(c, async (s) => {
      s.onAbort(() => {
        feed.aborted = true;
      });
      for (let i = 0; i < 3 && !feed.aborted; i++) {
        await s.write(`chunk ${feed.writes++}\n`);
        await s.sleep(10);
      }
    }),
  'a ReadableStream body that never ends': (c, feed) =>
    c.body(
      new ReadableStream<Uint8Array>(
        {
          async pull(controller) {
            await sleep(10);
            if (feed.stop) controller.close();
            else controller.enqueue(new TextEncoder().encode(`tick ${feed.writes++}\n`));
          },
          cancel() {
            feed.aborted = true;
          },
        },
        { highWaterMark: 0 },
      ),
      202,
    ),
};

describe('the client left while the handler ran, and the handler answers with a stream', () => {
  for (const [name, answer] of Object.entries(answers)) {
    test(`${name}: the key settles with its status and no body, the stream stops; the retry replays`, async () => {
      const store = createMemoryStore({ sweepIntervalMs: false });
      const app = new Hono<IdempotencyEnv>();
      app.use(idempotency({ store, leaseMs: 150, heartbeatIntervalMs: 50 }));
      const feed: Feed = { aborted: false, writes: 0, stop: false };
      let runs = 0;
      app.post('/events', async (c) => {
        runs++;
        // Answers only once its client has gone (a slow handler whose client timed out).
        const { signal } = c.req.raw;
        await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
        return answer(c, feed);
      });
      const server = await listen(app.fetch);
      closers.push(server.close);
      const key = v7();
      const client = new AbortController();
      const leaving = fetch(`${server.url}/events`, keyed(key, client.signal)).catch(() => undefined);
      await sleep(50);
      client.abort();
      await leaving;
      try {
        await sleep(500); // more than three leases
        const writesThen = feed.writes;
        await sleep(100);
        const settled = await recordOf(store, key);
        const retry = await fetch(`${server.url}/events`, keyed(key));
        const status = name.startsWith('a ReadableStream') ? 202 : 200;
        expect({
          settled,
          aborted: feed.aborted,
          stillWriting: feed.writes > writesThen,
          retry: [retry.status, retry.headers.get('idempotent-replayed'), await retry.text()],
          runs,
        }).toEqual({
          settled: { status, body: null, bodyOmitted: true },
          aborted: true,
          stillWriting: false,
          retry: [status, 'true', ''],
          runs: 1,
        });
      } finally {
        feed.stop = true;
      }
    });
  }
});
