import '@idem/adapter-fastify';
import type { Execution } from '@idem/core';
import type { FastifyContextConfig, FastifyRequest } from 'fastify';
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

describe('request.idempotency', () => {
  test('is the typed execution of the request, or undefined', () => {
    expectTypeOf<FastifyRequest['idempotency']>().toEqualTypeOf<Execution<FastifyRequest> | undefined>();
  });
});
