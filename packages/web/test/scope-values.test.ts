import type { IdempotencyStore } from '@idem/core';
import { createMemoryStore } from '@idem/store-memory';
import { type HandlerIdempotencyOptions, withIdempotency } from '@idem/web';
import { v7 } from 'uuid';
import { describe, expect, test } from 'vitest';

// design.md, "Records, scopes and time": the scope is "a string the host chooses", so that "one caller can never
// receive another's response". Plain JavaScript (or a loosely typed hook) easily returns something else: a
// Promise (an async principal lookup), the principal object instead of its id. Each would put every such
// request under one scope; `begin` refuses them (a TypeError, as a `scope` hook that throws fails the request)
// before anything is reserved, and the handler never runs.

const post = (key: string, user: string) =>
  new Request('https://api.example/transfers', {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': key, 'x-user': user },
    body: '{"amount":100}',
  });

async function stateOf(store: IdempotencyStore, key: string): Promise<string | undefined> {
  const record = await store.load({ scope: '', key });
  if (record === undefined) return undefined;
  return record.response === null ? 'in-flight' : 'completed';
}

const scopes: Record<string, (request: Request) => unknown> = {
  'an async scope (a Promise of the principal id)': async (request) => request.headers.get('x-user'),
  'the principal object instead of its id': (request) => ({ id: request.headers.get('x-user') }),
  'a number (an id that is not a string)': (request) => request.headers.get('x-user')?.length,
  'null (no principal, as a lookup answers)': () => null,
};

describe('a scope hook that returns no string', () => {
  for (const [name, scope] of Object.entries(scopes)) {
    test(`${name}: refused before anything is reserved; one user never receives another's answer`, async () => {
      const store = createMemoryStore({ sweepIntervalMs: false });
      let runs = 0;
      const handler = withIdempotency(
        async (request: Request) =>
          Response.json({ transfer: ++runs, owner: request.headers.get('x-user') }, { status: 201 }),
        { store, scope } as unknown as HandlerIdempotencyOptions,
      );
      // Two users who happen to send the same key (a client library with a fixed seed, a replayed request…).
      const key = v7();
      const outcome = (request: Request) =>
        handler(request).then(
          async (response) => ({ status: response.status, body: await response.text() }),
          (error: unknown) => ({ status: 'threw', body: String(error) }),
        );
      const alice = await outcome(post(key, 'alice'));
      const bob = await outcome(post(key, 'bob'));
      expect({ alice, bob }).toEqual({
        alice: { status: 'threw', body: expect.stringMatching(/^TypeError: scope must be a string/) },
        bob: { status: 'threw', body: expect.stringMatching(/^TypeError: scope must be a string/) },
      });
      expect(runs).toBe(0);
      expect(await stateOf(store, key)).toBeUndefined();
    });
  }

  test('a string scope keeps two users with one key apart', async () => {
    let runs = 0;
    const handler = withIdempotency(
      async (request: Request) =>
        Response.json({ transfer: ++runs, owner: request.headers.get('x-user') }, { status: 201 }),
      { store: createMemoryStore(), scope: (request) => request.headers.get('x-user') ?? undefined },
    );
    const key = v7();
    await (await handler(post(key, 'alice'))).text();
    const bob = await handler(post(key, 'bob'));
    expect([bob.headers.get('idempotent-replayed'), await bob.json()]).toEqual([
      null,
      { transfer: 2, owner: 'bob' },
    ]);
  });
});
