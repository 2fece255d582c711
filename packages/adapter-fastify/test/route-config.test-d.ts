import '@idem/adapter-fastify';
import type { FastifyContextConfig } from 'fastify';
import { describe, expectTypeOf, test } from 'vitest';

describe('the per-route config augmentation', () => {
  test('config.idempotency is false or an object of option overrides', () => {
    expectTypeOf<FastifyContextConfig['idempotency']>().toExtend<false | object | undefined>();
    expectTypeOf<{ idempotency: false }>().toExtend<FastifyContextConfig>();
    expectTypeOf<{
      idempotency: { keyFormat: 'token'; lifetimeMs: number };
    }>().toExtend<FastifyContextConfig>();
    expectTypeOf<{ idempotency: { lifetimeMs: 'soon' } }>().not.toExtend<FastifyContextConfig>();
    expectTypeOf<{ idempotency: true }>().not.toExtend<FastifyContextConfig>();
  });
});
