import { describe, expect, test } from 'vitest';
import { created, expectExecute, expectReject, inTransaction, post, setup } from './support/coordinator.js';

const r503 = { status: 503, headers: {}, body: null };

describe('after a write whose commit failed: release says false, then load', () => {
  for (const fault of ['throw', 'hang', 'limit'] as const) {
    test(`load ${fault}s: finish answers store-error, never throws`, async () => {
      const { idem, backend, events } = setup({ storeTimeoutMs: 20 });
      const execution = expectExecute(await idem.begin(post()));
      expect(
        await execution.finalizeWith(
          created(),
          inTransaction(() => true),
        ),
      ).toBe('finalized');
      backend.store.release = async () => false;
      backend.inject('load', fault);
      expect(await execution.finish(r503)).toBe('store-error');
      expect(events.map((e) => e.type)).toEqual([
        'reserved',
        fault === 'limit' ? 'store-limit' : 'store-error',
      ]);
      backend.resume();
    });
  }
});

describe('idem.with: nested options', () => {
  test('a route that overrides one status keeps the base’s other statuses', async () => {
    const { idem } = setup({ statuses: { keyReused: 400, inProgress: 503 } });
    const route = idem.with({ statuses: { storeLimit: 413 } });
    await expectExecute(await route.begin(post())).finish(created());
    // the same key for another request: the base answers 400, and so should the route
    expectReject(await idem.begin(post({ body: { other: true } })), 400, 'IDEMPOTENCY_KEY_REUSED');
    expectReject(await route.begin(post({ body: { other: true } })), 400, 'IDEMPOTENCY_KEY_REUSED');
  });
});
