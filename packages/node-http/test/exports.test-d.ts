import type {
  errorResponse,
  FormatError,
  IdemError,
  IdempotencyOptions,
  IdempotentRequest,
  ReplayResponse,
  UNSEEN_BODY,
  WholeResponse,
} from '@idem/core';
import type { describeRequest, KeptBody, NodeIdempotencyOptions } from '@idem/node-http';
import { describe, expectTypeOf, test } from 'vitest';

interface Host {
  readonly id: string;
}

describe('@idem/node-http types', () => {
  test("NodeIdempotencyOptions: the coordinator's options, scope and formatError over the host's request", () => {
    expectTypeOf<NodeIdempotencyOptions<Host>>().toExtend<IdempotencyOptions<Host>>();
    expectTypeOf<NonNullable<NodeIdempotencyOptions<Host>['scope']>>().parameter(0).toEqualTypeOf<Host>();
    expectTypeOf<NonNullable<NodeIdempotencyOptions<Host>['formatError']>>().toEqualTypeOf<
      FormatError<Host>
    >();
    expectTypeOf<FormatError<Host>>().parameters.toEqualTypeOf<[IdemError, Host]>();
  });

  test('a replay and an error answer are whole responses', () => {
    expectTypeOf<ReplayResponse>().toExtend<WholeResponse>();
    expectTypeOf<ReturnType<typeof errorResponse>>().toExtend<WholeResponse>();
    expectTypeOf<ReturnType<typeof errorResponse>['body']>().toEqualTypeOf<string>();
  });

  test('describeRequest gives begin its request, typed by the host', () => {
    expectTypeOf<ReturnType<typeof describeRequest<Host>>>().toEqualTypeOf<IdempotentRequest<Host>>();
  });

  test('a kept body is bytes or unseen', () => {
    // Both ways rather than toEqualTypeOf, whose deep comparison trips on Buffer's type parameter.
    expectTypeOf<ReturnType<KeptBody['bytes']>>().toExtend<Buffer | typeof UNSEEN_BODY>();
    expectTypeOf<Buffer | typeof UNSEEN_BODY>().toExtend<ReturnType<KeptBody['bytes']>>();
  });
});
