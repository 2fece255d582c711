import { ErrorCode, type IdempotencyOptions, UNSEEN_BODY } from '@idem/core';
import { describe, expect, test } from 'vitest';
import { expectExecute, expectReject, post, setup } from './support/coordinator.js';

// Attacks on issue 19 item 1 (a keyed body no parser read is a 415 before anything is reserved): they held.
describe('review: a keyed unseen body is a 415 in every mode, with nothing reserved', () => {
  test.each<[string, Partial<IdempotencyOptions>]>([
    ['fail-open', { failMode: 'open' }],
    ['reserve in the transaction', { reserveIn: 'transaction' as const }],
    ['a fingerprint options object', { fingerprint: { excludeFields: ['meta.id'] } }],
    ['the store down', {}],
  ])('%s', async (name, options) => {
    const { idem, backend } = setup(options);
    if (name === 'the store down') backend.inject('reserve', 'throw');
    expectReject(
      await idem.begin(post({ body: UNSEEN_BODY, contentType: 'text/plain' })),
      415,
      ErrorCode.BodyUnseen,
    );
    expect(backend.calls).toEqual([]);
  });

  test('an invalid key is still a 400 first; a custom fingerprint function decides for itself', async () => {
    const { idem } = setup();
    expectReject(await idem.begin(post({ body: UNSEEN_BODY, key: 'not a key' })), 400, ErrorCode.KeyInvalid);
    const custom = setup({ fingerprint: () => 'fp' });
    expectExecute(await custom.idem.begin(post({ body: UNSEEN_BODY })));
  });
});
