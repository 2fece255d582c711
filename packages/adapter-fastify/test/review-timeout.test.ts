import { fastifyIdempotency } from '@idem/adapter-fastify';
import type { IdempotencyEvent, TransactionalStore } from '@idem/core';
import { createMemoryStore } from '@idem/store-memory';
import Fastify from 'fastify';
import { v7 } from 'uuid';
import { expect, test } from 'vitest';

// Review: Fastify's handlerTimeout answers 503 while the handler still runs. With reserveIn 'transaction' the
// handler may be waiting in reserveWith (a row lock) when that 503 settles the execution.

test('reserveIn transaction + handlerTimeout: a 503 while reserveWith waits: reserveWith refuses, the key is left free', async () => {
  const store = createMemoryStore({ sweepIntervalMs: false });
  const events: IdempotencyEvent[] = [];
  const app = Fastify({ handlerTimeout: 30 });
  await app.register(fastifyIdempotency, {
    store,
    reserveIn: 'transaction',
    onEvent: (e) => events.push(e),
  });
  let caught: unknown;
  let reservation: unknown;
  const handled = new Promise<void>((resolve) => {
    app.post('/orders', async (request) => {
      const execution = request.idempotency;
      if (execution?.lifecycle !== 'transactional') throw new Error('not transactional');
      // A transaction whose reserve waits on a row lock held by another connection for 80 ms.
      const tx: TransactionalStore = {
        reserve: async (p) => {
          await new Promise((r) => setTimeout(r, 80));
          return store.reserve(p);
        },
        finalize: (p) => store.finalize(p),
        release: (p) => store.release(p),
      };
      try {
        reservation = await execution.reserveWith(tx);
      } catch (error) {
        caught = error;
      } finally {
        resolve();
      }
      return { ok: true };
    });
  });
  const key = v7();
  const response = await app.inject({ method: 'POST', url: '/orders', headers: { 'idempotency-key': key } });
  expect(response.statusCode).toBe(503); // Fastify's handler timeout
  await handled;
  // The request was answered before its key was reserved: the handler is told to do nothing (a refusal, no
  // internal error), and the reservation its store made is released, so a retry runs at once.
  expect(caught).toBeUndefined();
  expect(reservation).toMatchObject({ action: 'reject', error: { code: 'IDEMPOTENCY_IN_PROGRESS' } });
  expect(await store.load({ scope: '', key })).toBeUndefined();
  expect(events.map((e) => e.type)).not.toContain('reserved');
  await app.close();
});
