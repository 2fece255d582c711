import '@idem/adapter-express';
import type { Execution } from '@idem/core';
import type { Request } from 'express';
import { describe, expectTypeOf, test } from 'vitest';

describe('req.idempotency', () => {
  test('is the typed execution of the request, or undefined', () => {
    expectTypeOf<Request['idempotency']>().toEqualTypeOf<Execution<Request> | undefined>();
  });
});
