import type { FinalizeParams } from '@idem/core';
import { describe, expect, test } from 'vitest';
import { created, expectExecute, expectReplay, inTransaction, post, setup } from './support/coordinator.js';

// finalizeWith: the host's own transaction writes the record, in one call (design: transactional finalize).

describe('execution.finalizeWith: finalize inside the host’s transaction in one call', () => {
  test('applies the rule and redact, passes the coordinator’s clock and this owner, and settles the execution', async () => {
    const { idem, backend, clock, events } = setup({
      redact: (stored) => ({ ...stored, headers: { ...stored.headers, location: '/redacted' } }),
    });
    const execution = expectExecute(await idem.begin(post()));
    const seen: FinalizeParams[] = [];
    const outcome = await execution.finalizeWith(
      created(),
      inTransaction((params) => {
        seen.push(params);
        return backend.store.finalize(params);
      }),
    );
    expect(outcome).toBe('finalized');
    expect(seen).toHaveLength(1);
    expect(seen[0]).toMatchObject({
      scope: '',
      key: execution.key,
      owner: execution.owner,
      nowMs: clock.nowMs(),
    });
    expect(seen[0]?.response.headers.location).toBe('/redacted');
    // The response then goes out with the same status: nothing more is written.
    const calls = backend.calls.length;
    expect(await execution.finish(created())).toBe('finalized');
    expect(backend.calls.length).toBe(calls);
    expect(events.filter((e) => e.type === 'finalized')).toEqual([
      expect.objectContaining({ external: true }),
    ]);
    expectReplay(await idem.begin(post()));
  });

  test('a status the rule releases: nothing is written in the transaction, and the answer releases the key', async () => {
    const { idem, backend } = setup();
    const execution = expectExecute(await idem.begin(post()));
    let called = false;
    const outcome = await execution.finalizeWith(
      { status: 503, headers: {}, body: null },
      inTransaction(() => {
        called = true;
        return true;
      }),
    );
    expect(outcome).toBe('not-stored');
    expect(called).toBe(false);
    expect(await execution.finish({ status: 503, headers: {}, body: null })).toBe('released');
    expect(backend.records.size).toBe(0);
  });

  test('a lost reservation is reported as lease-lost, so that the host rolls back', async () => {
    const { idem, events } = setup();
    const execution = expectExecute(await idem.begin(post()));
    expect(
      await execution.finalizeWith(
        created(),
        inTransaction(() => false),
      ),
    ).toBe('lease-lost');
    expect(events.at(-1)).toMatchObject({ type: 'lease-lost', phase: 'finalize' });
    expect(await execution.finish(created())).toBe('already-settled');
  });

  test('the transaction fails after the finalize (rolled back): the answer that goes out releases the key', async () => {
    const { idem, backend } = setup();
    const execution = expectExecute(await idem.begin(post()));
    // The host's transaction: the finalize "happens" inside it, then the commit fails and nothing is kept.
    expect(
      await execution.finalizeWith(
        created(),
        inTransaction(() => true),
      ),
    ).toBe('finalized');
    expect(backend.only()?.response).toBeNull(); // rolled back: still in flight, ours
    expect(await execution.finish({ status: 503, headers: {}, body: null })).toBe('released');
    expect(backend.records.size).toBe(0);
  });

  test('a finalize that throws (the host’s database failed): an abort afterwards releases the key', async () => {
    const { idem, backend } = setup();
    const execution = expectExecute(await idem.begin(post()));
    await expect(
      execution.finalizeWith(
        created(),
        inTransaction(() => {
          throw new Error('connection lost');
        }),
      ),
    ).rejects.toThrow('connection lost');
    await execution.abort();
    expect(backend.records.size).toBe(0);
  });

  test('after a commit that went through, a different answer changes nothing: the record stays completed', async () => {
    const { idem, backend } = setup();
    const execution = expectExecute(await idem.begin(post()));
    await execution.finalizeWith(
      created(),
      inTransaction((params) => backend.store.finalize(params)),
    );
    expect(await execution.finish({ status: 500, headers: {}, body: null })).toBe('finalized');
    expect(backend.only()?.response?.status).toBe(201);
  });
});

describe('hooks receive the request, not data packed into the scope', () => {
  test('redact and rebuildReplay get scope, key, method, route, path and the adapter’s host object', async () => {
    const contexts: unknown[] = [];
    const { idem } = setup({
      redact: (stored, context) => {
        contexts.push(context);
        return stored;
      },
      rebuildReplay: (_stored, context) => {
        contexts.push(context);
        return undefined;
      },
    });
    const host = { params: { prefix: 'warehouse-1' } };
    const request = post({
      scope: 'alice',
      route: '/v1/:prefix/orders',
      path: '/v1/warehouse-1/orders',
      host,
    });
    await expectExecute(await idem.begin(request)).finish(created());
    expectReplay(await idem.begin(request));
    const expected = {
      scope: 'alice',
      key: request.key,
      method: 'POST',
      route: '/v1/:prefix/orders',
      path: '/v1/warehouse-1/orders',
      host,
    };
    expect(contexts).toHaveLength(2);
    for (const context of contexts) expect(context).toMatchObject(expected);
  });
});
