import { type HonoIdempotencyOptions, type IdempotencyEnv, idempotency } from '@idem/adapter-hono';
import type { IdempotencyStore } from '@idem/core';
import { createMemoryStore } from '@idem/store-memory';
import { type Context, Hono } from 'hono';
import { v7 } from 'uuid';
import { describe, expect, test } from 'vitest';

// A `scope` hook that returns something other than a string. design.md, "Records, scopes and time": "The same
// key in two scopes is two unrelated records, so one caller can never receive another's response." An async
// principal lookup (`scope: async (c) => (await session(c)).userId`) or the principal object itself
// (`scope: (c) => c.get('user')`) is an easy mistake in JavaScript, or wherever `c.get` is untyped. `begin`
// refuses such a scope (a TypeError) before anything is reserved: the request fails as it does when `scope`
// throws (`app.onError` answers), and the handler never runs.

async function stateOf(store: IdempotencyStore, key: string): Promise<string | undefined> {
  const record = await store.load({ scope: '', key });
  if (record === undefined) return undefined;
  return record.response === null ? 'in-flight' : 'completed';
}

const scopes: Record<string, (c: Context) => unknown> = {
  'an async scope (a Promise of the principal id)': async (c) => c.req.header('x-user'),
  'the principal object instead of its id': (c) => ({ id: c.req.header('x-user') }),
  'a number (an id that is not a string)': (c) => c.req.header('x-user')?.length,
  'null (no principal, as a lookup answers)': () => null,
};

describe('a scope hook that returns no string', () => {
  for (const [name, scope] of Object.entries(scopes)) {
    test(`${name}: app.onError answers, nothing is reserved; one user never receives another's answer`, async () => {
      const store = createMemoryStore({ sweepIntervalMs: false });
      const app = new Hono<IdempotencyEnv>();
      app.use(idempotency({ store, scope } as unknown as HonoIdempotencyOptions));
      const errors: string[] = [];
      app.onError((error, c) => {
        errors.push(`${error.name}: ${error.message}`);
        return c.json({ error: 'internal' }, 500);
      });
      let runs = 0;
      app.post('/transfers', (c) => c.json({ transfer: ++runs, owner: c.req.header('x-user') }, 201));
      // Two users who happen to send the same key (a client library with a fixed seed, a replayed request…).
      const key = v7();
      const send = async (user: string) => {
        const answer = await app.request('/transfers', {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'idempotency-key': key, 'x-user': user },
          body: '{"amount":100}',
        });
        return [answer.status, answer.headers.get('idempotent-replayed'), await answer.text()];
      };
      const alice = await send('alice');
      const bob = await send('bob');
      expect({ alice, bob, runs }).toEqual({
        alice: [500, null, '{"error":"internal"}'],
        bob: [500, null, '{"error":"internal"}'],
        runs: 0,
      });
      expect(errors).toEqual([
        expect.stringMatching(/^TypeError: scope must be a string/),
        expect.stringMatching(/^TypeError: scope must be a string/),
      ]);
      expect(await stateOf(store, key)).toBeUndefined();
    });
  }
});
