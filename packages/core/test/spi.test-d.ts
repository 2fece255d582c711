import type {
  BeginResult,
  IdempotencyRecord,
  IdempotencyStore,
  ReserveParams,
  ReserveResult,
  StoredResponse,
} from '@idem/core';
import { describe, expectTypeOf, test } from 'vitest';

describe('the store SPI types', () => {
  test('every method is async and takes one object', () => {
    expectTypeOf<IdempotencyStore['reserve']>().parameters.toEqualTypeOf<[ReserveParams]>();
    expectTypeOf<ReturnType<IdempotencyStore['reserve']>>().toEqualTypeOf<Promise<ReserveResult>>();
    expectTypeOf<ReturnType<IdempotencyStore['load']>>().toEqualTypeOf<
      Promise<IdempotencyRecord | undefined>
    >();
    expectTypeOf<ReturnType<IdempotencyStore['finalize']>>().toEqualTypeOf<Promise<boolean>>();
    expectTypeOf<ReturnType<IdempotencyStore['purgeExpired']>>().toEqualTypeOf<Promise<number>>();
  });

  test('close is optional', () => {
    expectTypeOf<IdempotencyStore>()
      .toHaveProperty('close')
      .toEqualTypeOf<(() => Promise<void>) | undefined>();
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
