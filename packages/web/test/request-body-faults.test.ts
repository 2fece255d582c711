import type { IdempotencyStore } from '@idem/core';
import { createMemoryStore } from '@idem/store-memory';
import { withIdempotency } from '@idem/web';
import { v7 } from 'uuid';
import { describe, expect, test } from 'vitest';

// A keyed request whose body cannot be read whole (an upload cut off, a proxy that broke the stream, a body
// something read already). design.md, "The adapter contract": the adapter hands `begin` "`UNSEEN_BODY` when a
// body is there that nothing read, which the coordinator answers with a 415 `IDEMPOTENCY_BODY_UNSEEN` before
// reserving anything", as @idem/node-http does for a body whose stream failed.

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

const keyed = (key: string, body: BodyInit) =>
  new Request('https://api.example/orders', {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': key },
    body,
    duplex: 'half',
  } as RequestInit);

type BodyInit = NonNullable<ConstructorParameters<typeof Request>[1]>['body'];

const requests: Record<string, (key: string) => Promise<Request>> = {
  'a body stream that fails midway': async (key) => keyed(key, failingAfter(1)),
  'a body stream that fails before its first chunk': async (key) => keyed(key, failingAfter(0)),
  'a body read already (by an earlier layer)': async (key) => {
    const request = keyed(key, '{"item":"book"}');
    await request.text();
    return request;
  },
};

describe('a keyed request body that cannot be read whole', () => {
  for (const [name, make] of Object.entries(requests)) {
    test(`${name}: 415 IDEMPOTENCY_BODY_UNSEEN, the handler not run, nothing reserved`, async () => {
      const store = createMemoryStore({ sweepIntervalMs: false });
      let runs = 0;
      const handler = withIdempotency(
        async (request: Request) =>
          Response.json({ run: ++runs, body: await request.json() }, { status: 201 }),
        { store },
      );
      const key = v7();
      const answer = await handler(await make(key)).then(
        async (response) => ({ status: response.status, body: await response.json() }),
        (error: unknown) => ({ status: 'threw', body: String(error) }),
      );
      expect(answer).toEqual({
        status: 415,
        body: { error: { code: 'IDEMPOTENCY_BODY_UNSEEN', message: expect.any(String) } },
      });
      expect(runs).toBe(0);
      expect(await stateOf(store, key)).toBeUndefined();
      // The retry, its body whole, runs.
      const retry = await handler(keyed(key, '{"item":"book"}'));
      expect([retry.status, await retry.json()]).toEqual([201, { run: 1, body: { item: 'book' } }]);
    });
  }
});
