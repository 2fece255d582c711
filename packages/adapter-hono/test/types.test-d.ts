import { type IdempotencyEnv, type IdempotencyMiddleware, idempotency } from '@idem/adapter-hono';
import type { Execution } from '@idem/core';
import { createMemoryStore } from '@idem/store-memory';
import { type Context, Hono, type MiddlewareHandler } from 'hono';
import { describe, expectTypeOf, test } from 'vitest';

describe('@idem/adapter-hono types', () => {
  test("c.get('idempotency') is the execution, typed through IdempotencyEnv, next to the app's own variables", () => {
    type Env = { Variables: IdempotencyEnv['Variables'] & { user: { id: string } } };
    const app = new Hono<Env>();
    const idem = idempotency({ store: createMemoryStore(), scope: (c) => c.req.header('x-user') });
    app.use(idem);
    app.post('/orders', idem.with({ lifetimeMs: 1_000 }), (c) => {
      expectTypeOf(c.get('idempotency')).toEqualTypeOf<Execution<Context> | undefined>();
      expectTypeOf(c.get('user')).toEqualTypeOf<{ id: string }>();
      return c.text('ok');
    });
  });

  test('the middleware and its per-route form are Hono middleware', () => {
    expectTypeOf<IdempotencyMiddleware>().toExtend<MiddlewareHandler<IdempotencyEnv>>();
    expectTypeOf<ReturnType<IdempotencyMiddleware['with']>>().toEqualTypeOf<
      MiddlewareHandler<IdempotencyEnv>
    >();
  });
});
