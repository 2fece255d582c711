import { BODY_OMITTED_HEADER, ErrorCode } from '@idem/core';
import { describe, expect, test } from 'vitest';
import { created, expectExecute, expectReject, expectReplay, post, setup } from './support/coordinator.js';

describe('coordinator: execute, finalize, replay (design: The coordinator; Finalization rules; Replay fidelity and secrets)', () => {
  test('reserved → execute; 201 finalized; the retry replays status, allow-listed headers and body', async () => {
    const { idem, backend, events } = setup();
    const execution = expectExecute(await idem.begin(post()));
    expect(execution.tookOver).toBe(false);
    expect(await execution.finish(created())).toBe('finalized');
    const replay = expectReplay(await idem.begin(post()));
    expect(replay.status).toBe(201);
    expect(replay.headers).toEqual({
      'content-type': 'application/json',
      location: '/v1/orders/1',
      'idempotent-replayed': 'true',
    });
    expect(Buffer.from(replay.body ?? []).toString()).toBe('{"id":1}');
    expect(backend.only()?.response?.headers).not.toHaveProperty('set-cookie');
    expect(events.map((e) => e.type)).toEqual(['reserved', 'finalized', 'replayed']);
    for (const event of events) expect(event).toHaveProperty('durationMs', expect.any(Number));
  });

  test('a replay of the same JSON with its keys in another order still replays', async () => {
    const { idem } = setup();
    await expectExecute(await idem.begin(post({ body: { a: 1, b: 2 } }))).finish(created());
    expectReplay(await idem.begin(post({ body: { b: 2, a: 1 } })));
  });

  test('same key, different fingerprint: 422 IDEMPOTENCY_KEY_REUSED, nothing stored', async () => {
    const { idem, backend, events } = setup();
    await expectExecute(await idem.begin(post())).finish(created());
    const before = backend.only();
    expectReject(await idem.begin(post({ body: { item: 'pen' } })), 422, ErrorCode.KeyReused);
    expectReject(await idem.begin(post({ route: '/v1/refunds' })), 422, ErrorCode.KeyReused);
    expect(backend.only()).toBe(before);
    expect(events.filter((e) => e.type === 'mismatch')).toHaveLength(2);
  });

  test('the fingerprint is checked before the in-flight state', async () => {
    const { idem } = setup();
    expectExecute(await idem.begin(post()));
    expectReject(await idem.begin(post({ body: { item: 'pen' } })), 422, ErrorCode.KeyReused);
  });

  test.each([
    [500, 'released'],
    [503, 'released'],
    [429, 'released'],
    [401, 'released'],
    [404, 'finalized'],
    [409, 'finalized'],
    [204, 'finalized'],
    [302, 'finalized'],
  ] as const)('a %i response is %s', async (status, outcome) => {
    const { idem, backend } = setup();
    const execution = expectExecute(await idem.begin(post()));
    expect(await execution.finish({ status, headers: {}, body: null })).toBe(outcome);
    if (outcome === 'released') {
      expect(backend.records.size).toBe(0);
      expectExecute(await idem.begin(post()));
    } else {
      expect(expectReplay(await idem.begin(post())).status).toBe(status);
    }
  });

  test('the finalization rule can be overridden', async () => {
    const { idem, backend } = setup({
      finalizationRule: (status) => (status === 500 ? 'finalize' : 'release'),
    });
    await expectExecute(await idem.begin(post())).finish({ status: 500, headers: {}, body: 'boom' });
    expect(backend.only()?.response?.status).toBe(500);
  });

  test('handler threw or the client aborted: abort releases, and the retry executes', async () => {
    const { idem, backend, events } = setup();
    const execution = expectExecute(await idem.begin(post()));
    await execution.abort();
    expect(backend.records.size).toBe(0);
    expect(events.at(-1)).toMatchObject({ type: 'released', reason: 'aborted' });
    expect(await execution.finish(created())).toBe('already-settled');
    expectExecute(await idem.begin(post()));
  });

  test('finish twice is harmless', async () => {
    const { idem, backend } = setup();
    const execution = expectExecute(await idem.begin(post()));
    expect(await execution.finish(created())).toBe('finalized');
    expect(await execution.finish({ status: 500, headers: {}, body: null })).toBe('already-settled');
    expect(backend.calls.filter((c) => c === 'finalize')).toHaveLength(1);
  });

  test('finalize returned false (lease lost): a lease-lost event, the outcome says so, nothing overwritten', async () => {
    const { idem, backend, clock, events } = setup({ leaseMs: 1_000 });
    const first = expectExecute(await idem.begin(post()));
    clock.advance(1_000);
    const second = expectExecute(await idem.begin(post()));
    expect(second.tookOver).toBe(true);
    expect(await first.finish(created({ id: 'first' }))).toBe('lease-lost');
    expect(events.find((e) => e.type === 'lease-lost')).toMatchObject({ phase: 'finalize' });
    expect(await second.finish(created({ id: 'second' }))).toBe('finalized');
    expect(Buffer.from(backend.only()?.response?.body ?? []).toString()).toBe('{"id":"second"}');
  });

  test('a body over the cap is not stored; the replay has status and headers and says the body was omitted', async () => {
    const { idem, backend } = setup({ maxBodyBytes: 10 });
    await expectExecute(await idem.begin(post())).finish(created({ long: 'x'.repeat(20) }));
    expect(backend.only()?.response).toMatchObject({ status: 201, body: null, bodyOmitted: true });
    const replay = expectReplay(await idem.begin(post()));
    expect(replay.headers[BODY_OMITTED_HEADER]).toBe('true');
    expect(replay.headers.location).toBe('/v1/orders/1');
    expect(replay.body).toBeNull();
  });

  test('a body the adapter stopped buffering (truncated) is recorded as omitted', async () => {
    const { idem, backend } = setup();
    await expectExecute(await idem.begin(post())).finish({ ...created(), bodyTruncated: true });
    expect(backend.only()?.response?.bodyOmitted).toBe(true);
  });

  test('binary bodies are stored byte for byte', async () => {
    const { idem } = setup();
    const bytes = Uint8Array.from([0, 1, 254, 255]);
    await expectExecute(await idem.begin(post())).finish({ status: 200, headers: {}, body: bytes });
    expect([...(expectReplay(await idem.begin(post())).body ?? [])]).toEqual([0, 1, 254, 255]);
  });

  test('redact rewrites the response before it is stored; the client of the first call is unaffected', async () => {
    const { idem, backend } = setup({
      redact: (response, context) => ({
        ...response,
        body: Buffer.from(`redacted:${context.key.slice(0, 4)}`),
      }),
    });
    await expectExecute(await idem.begin(post())).finish(created({ secret: 's3cr3t' }));
    expect(Buffer.from(backend.only()?.response?.body ?? []).toString()).toBe('redacted:0190');
  });

  test('rebuildReplay answers from current state; undefined falls back to what was stored', async () => {
    let current: string | undefined = 'v2';
    const { idem } = setup({
      rebuildReplay: (stored) => (current ? { ...stored, body: Buffer.from(current) } : undefined),
    });
    await expectExecute(await idem.begin(post())).finish({ status: 200, headers: {}, body: 'v1' });
    expect(Buffer.from(expectReplay(await idem.begin(post())).body ?? []).toString()).toBe('v2');
    current = undefined;
    expect(Buffer.from(expectReplay(await idem.begin(post())).body ?? []).toString()).toBe('v1');
  });

  test('keys are scoped: the same key in another scope is an unrelated record', async () => {
    const { idem } = setup();
    await expectExecute(await idem.begin(post({ scope: 'alice' }))).finish(created());
    const bob = expectExecute(await idem.begin(post({ scope: 'bob', body: { other: 1 } })));
    expect(bob.scope).toBe('bob');
    expectReplay(await idem.begin(post({ scope: 'alice' })));
  });

  test('the record lives for lifetime + grace; after that the key is new again', async () => {
    const { idem, backend, clock } = setup({ lifetimeMs: 10_000, graceMs: 500 });
    await expectExecute(await idem.begin(post())).finish(created());
    expect(backend.only()?.expiresAtMs).toBe((backend.only()?.createdAtMs ?? 0) + 10_500);
    clock.advance(10_499);
    expectReplay(await idem.begin(post()));
    clock.advance(1);
    expectExecute(await idem.begin(post({ body: { different: true } })));
  });

  test('its own 409 and 422 answers are never stored', async () => {
    const { idem, backend } = setup();
    const execution = expectExecute(await idem.begin(post()));
    expectReject(await idem.begin(post()), 409, ErrorCode.InProgress);
    expectReject(await idem.begin(post({ body: 'x' })), 422, ErrorCode.KeyReused);
    expect(backend.calls.filter((c) => c !== 'reserve')).toEqual([]);
    expect(backend.only()?.response).toBeNull();
    await execution.finish(created());
  });
});
