import { type IdempotencyEnv, idempotency } from '@idem/adapter-hono';
import type { IdempotencyStore } from '@idem/core';
import { createMemoryStore } from '@idem/store-memory';
import { Hono } from 'hono';
import { v7 } from 'uuid';
import { describe, expect, test } from 'vitest';

// A keyed request whose body cannot be read whole (an upload cut off, a proxy that broke the stream).
// design.md, "The adapter contract": the adapter hands `begin` "`UNSEEN_BODY` when a body is there that nothing
// read, which the coordinator answers with a 415 `IDEMPOTENCY_BODY_UNSEEN` before reserving anything", as
// @idem/node-http does for a body whose stream failed: a clear 4xx with a stable code, not a 500 from the
// app's error handler.

async function stateOf(store: IdempotencyStore, key: string): Promise<string | undefined> {
  const record = await store.load({ scope: '', key });
  if (record === undefined) return undefined;
  return record.response === null ? 'in-flight' : 'completed';
}

/** A body that yields `good` chunks, then fails. */
const failingAfter = (good: number) => {
  let sent = 0;
  return new ReadableStream<Uint8Array>({
    pull(controller) {
      if (sent === good) controller.error(new Error('upload cut off'));
      else {
        sent++;
        controller.enqueue(new TextEncoder().encode('{"item":'));
      }
    },
  });
};

const cases: Record<string, { readonly good: number; readonly earlier?: boolean }> = {
  'a body stream that fails midway': { good: 1 },
  'a body stream that fails before its first chunk': { good: 0 },
  'a body an earlier middleware failed to read (and went on)': { good: 1, earlier: true },
};

describe('a keyed request body that cannot be read whole', () => {
  for (const [name, { good, earlier }] of Object.entries(cases)) {
    test(`${name}: 415 IDEMPOTENCY_BODY_UNSEEN, the handler not run, nothing reserved`, async () => {
      const store = createMemoryStore({ sweepIntervalMs: false });
      const app = new Hono<IdempotencyEnv>();
      if (earlier) {
        app.use(async (c, next) => {
          await c.req.text().catch(() => undefined); // an audit log that reads what it can
          await next();
        });
      }
      app.use(idempotency({ store }));
      app.onError((_error, c) => c.json({ error: 'internal' }, 500));
      let runs = 0;
      app.post('/orders', async (c) => c.json({ run: ++runs, body: await c.req.json() }, 201));
      const key = v7();
      const send = (body: ReadableStream<Uint8Array> | string) =>
        app.request('/orders', {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'idempotency-key': key },
          body,
          duplex: 'half',
        } as RequestInit);
      const answer = await send(failingAfter(good));
      expect({ status: answer.status, body: await answer.json() }).toEqual({
        status: 415,
        body: { error: { code: 'IDEMPOTENCY_BODY_UNSEEN', message: expect.any(String) } },
      });
      expect(runs).toBe(0);
      expect(await stateOf(store, key)).toBeUndefined();
      // The retry, its body whole, runs.
      const retry = await send('{"item":"book"}');
      expect([retry.status, await retry.json()]).toEqual([201, { run: 1, body: { item: 'book' } }]);
    });
  }
});
