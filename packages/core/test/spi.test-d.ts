import type {
  BeginResult,
  IdempotencyRecord,
  IdempotencyStore,
  MaybePromise,
  ReserveParams,
  ReserveResult,
  StoredResponse,
} from '@idem/core';
import { describe, expectTypeOf, test } from 'vitest';

describe('the store SPI types', () => {
  test('every method takes one object and returns its result or a promise of it', () => {
    expectTypeOf<IdempotencyStore['reserve']>().parameters.toEqualTypeOf<[ReserveParams]>();
    expectTypeOf<ReturnType<IdempotencyStore['reserve']>>().toEqualTypeOf<MaybePromise<ReserveResult>>();
    expectTypeOf<ReturnType<IdempotencyStore['load']>>().toEqualTypeOf<
      MaybePromise<IdempotencyRecord | undefined>
    >();
    expectTypeOf<ReturnType<IdempotencyStore['finalize']>>().toEqualTypeOf<MaybePromise<boolean>>();
    expectTypeOf<ReturnType<IdempotencyStore['purgeExpired']>>().toEqualTypeOf<MaybePromise<number>>();
    // A store may answer synchronously, or with a promise (or any thenable).
    expectTypeOf<ReserveResult>().toExtend<ReturnType<IdempotencyStore['reserve']>>();
    expectTypeOf<Promise<ReserveResult>>().toExtend<ReturnType<IdempotencyStore['reserve']>>();
    expectTypeOf<PromiseLike<boolean>>().toExtend<ReturnType<IdempotencyStore['finalize']>>();
  });

  test('close is optional', () => {
    expectTypeOf<IdempotencyStore>()
      .toHaveProperty('close')
      .toEqualTypeOf<(() => MaybePromise<void>) | undefined>();
  });

  test('only a reserved outcome says whether it took over', () => {
    expectTypeOf<Extract<ReserveResult, { outcome: 'reserved' }>>()
      .toHaveProperty('tookOver')
      .toEqualTypeOf<boolean>();
    expectTypeOf<Extract<ReserveResult, { outcome: 'exists' }>>().not.toHaveProperty('tookOver');
  });

  test('records and responses are read-only', () => {
    expectTypeOf<IdempotencyRecord>().toEqualTypeOf<Readonly<IdempotencyRecord>>();
    expectTypeOf<StoredResponse>().toEqualTypeOf<Readonly<StoredResponse>>();
    expectTypeOf<StoredResponse['body']>().toEqualTypeOf<Uint8Array | null>();
  });

  test('begin results are a closed union on action', () => {
    expectTypeOf<BeginResult['action']>().toEqualTypeOf<
      'proceed' | 'execute' | 'reserve-in-transaction' | 'replay' | 'reject'
    >();
  });

  test('each begin action that runs the handler carries its own lifecycle', () => {
    expectTypeOf<
      Extract<BeginResult, { action: 'execute' }>['execution']['lifecycle']
    >().toEqualTypeOf<'leased'>();
    expectTypeOf<
      Extract<BeginResult, { action: 'reserve-in-transaction' }>['execution']['lifecycle']
    >().toEqualTypeOf<'transactional'>();
    expectTypeOf<Extract<BeginResult, { action: 'execute' }>['execution']>().not.toHaveProperty(
      'reserveWith',
    );
  });
});
