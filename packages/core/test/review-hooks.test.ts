import type { IdempotencyEvent, TransactionalStore } from '@idem/core';
import { describe, expect, test } from 'vitest';
import {
  created,
  expectExecute,
  expectPending,
  expectReplay,
  failOnUnhandledRejections,
  post,
  setup,
} from './support/coordinator.js';

failOnUnhandledRejections();

const boom = () => {
  throw new Error('hook');
};

describe('hooks that throw', () => {
  for (const lifecycle of ['leased', 'transactional'] as const) {
    for (const path of ['finish', 'finalizeWith'] as const) {
      test(`${lifecycle}/${path}: a throwing finalizationRule and redact still store the status`, async () => {
        const { idem, backend, events } = setup({
          finalizationRule: boom,
          redact: boom,
          ...(lifecycle === 'transactional' ? { reserveIn: 'transaction' as const } : {}),
        });
        const begun = await idem.begin(post());
        const execution = lifecycle === 'leased' ? expectExecute(begun) : expectPending(begun);
        const tx = backend.store as TransactionalStore;
        if (lifecycle === 'transactional') {
          expect(await (execution as ReturnType<typeof expectPending>).reserveWith(tx)).toEqual({
            action: 'execute',
          });
        }
        if (path === 'finalizeWith') expect(await execution.finalizeWith(created(), tx)).toBe('finalized');
        expect(await execution.finish(created())).toBe('finalized');
        expect(backend.only()?.response).toMatchObject({ status: 201, headers: {}, body: null });
        expect(
          events.filter((e) => e.type === 'hook-error').map((e) => (e as { hook: string }).hook),
        ).toEqual(path === 'finalizeWith' ? ['finalizationRule', 'redact'] : ['finalizationRule', 'redact']);
      });
    }
  }

  test('onEvent listeners that throw or reject never reach the request', async () => {
    const seen: string[] = [];
    const { idem } = setup({
      onEvent: [
        boom,
        async () => {
          throw new Error('async');
        },
        (e: IdempotencyEvent) => seen.push(e.type),
      ],
    });
    const execution = expectExecute(await idem.begin(post()));
    expect(await execution.finish(created())).toBe('finalized');
    expectReplay(await idem.begin(post()));
    expect(seen).toEqual(['reserved', 'finalized', 'replayed']);
  });

  test('rebuildReplay that throws: the stored answer', async () => {
    const { idem } = setup({ rebuildReplay: boom });
    await expectExecute(await idem.begin(post())).finish(created());
    expect(expectReplay(await idem.begin(post())).status).toBe(201);
  });

  test('rebuildReplay that returns something that is not a response: begin must not reject', async () => {
    const { idem } = setup({ rebuildReplay: () => ({}) as never });
    await expectExecute(await idem.begin(post())).finish(created());
    await expect(idem.begin(post())).resolves.toMatchObject({ action: 'replay' });
  });

  test('rebuildReplay in reserveWith (transactional) that throws: the stored answer', async () => {
    const { idem, backend } = setup({ rebuildReplay: boom, reserveIn: 'transaction' });
    const tx = backend.store as TransactionalStore;
    const first = expectPending(await idem.begin(post()));
    await first.reserveWith(tx);
    await first.finalizeWith(created(), tx);
    await first.finish(created());
    const second = expectPending(await idem.begin(post()));
    expect(await second.reserveWith(tx)).toMatchObject({ action: 'replay', response: { status: 201 } });
    expect(await second.finish(created())).toBe('already-settled');
  });

  test('redact that returns a response with a non-number status, or string body: kept as the status alone', async () => {
    const { idem, backend } = setup({
      redact: (s) => ({ ...s, body: 'text' as unknown as Uint8Array }),
    });
    const execution = expectExecute(await idem.begin(post()));
    expect(await execution.finish(created())).toBe('finalized');
    expect(backend.only()?.response).toMatchObject({ status: 201, body: null, bodyOmitted: true });
  });
});
