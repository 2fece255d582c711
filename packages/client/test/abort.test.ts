import { createIdempotentFetch } from '@idem/client';
import { describe, expect, test } from 'vitest';
import { answer, fast, ORDERS, post, scriptedFetch } from './support/fake-fetch.js';
import { withHttpServer } from './support/http-server.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("the caller's AbortSignal stops a call at once", () => {
  test('already aborted: nothing is sent, the reason is thrown', async () => {
    const { fetch, sent } = scriptedFetch(answer(201));
    const reason = new Error('not any more');
    const call = createIdempotentFetch({ fetch })(ORDERS, { ...post(), signal: AbortSignal.abort(reason) });
    await expect(call).rejects.toBe(reason);
    expect(sent).toHaveLength(0);
  });

  test('during the backoff wait: the wait ends, no further attempt is sent', async () => {
    const { fetch, sent } = scriptedFetch(answer(503), answer(201));
    const controller = new AbortController();
    const started = Date.now();
    const call = createIdempotentFetch({ fetch, baseDelayMs: 10_000, maxDelayMs: 10_000, random: () => 1 })(
      ORDERS,
      {
        ...post(),
        signal: controller.signal,
      },
    );
    await sleep(50);
    controller.abort();
    await expect(call).rejects.toMatchObject({ name: 'AbortError' });
    expect(Date.now() - started).toBeLessThan(1000);
    await sleep(50);
    expect(sent).toHaveLength(1);
  });

  test('during a request: the request is aborted and not retried, even with attemptTimeoutMs', async () => {
    let requests = 0;
    let arrived: () => void = () => {};
    await withHttpServer(
      () => {
        requests++; // never answers
        arrived();
      },
      async (url) => {
        for (const options of [fast, { ...fast, attemptTimeoutMs: 5_000 }]) {
          const reason = new Error('caller left');
          const controller = new AbortController();
          // Aborted once the server has the request, however long a loaded machine takes to deliver it.
          const atServer = new Promise<void>((resolve) => {
            arrived = resolve;
          });
          const call = createIdempotentFetch(options)(`${url}/orders`, {
            ...post(),
            signal: controller.signal,
          });
          let abortedAt = 0;
          void atServer.then(() => {
            abortedAt = Date.now();
            controller.abort(reason);
          });
          await expect(call).rejects.toBe(reason);
          expect(Date.now() - abortedAt).toBeLessThan(1000); // at once, not at the attempt's timeout
        }
        await sleep(50);
        expect(requests).toBe(2);
      },
    );
  });

  test('AbortSignal.timeout rejects with its TimeoutError', async () => {
    const { fetch } = scriptedFetch(answer(503));
    const call = createIdempotentFetch({ fetch, baseDelayMs: 5_000, random: () => 1 })(ORDERS, {
      ...post(),
      signal: AbortSignal.timeout(30),
    });
    await expect(call).rejects.toMatchObject({ name: 'TimeoutError' });
  });

  test("a Request's own signal counts, and init.signal replaces it", async () => {
    const { fetch, sent } = scriptedFetch(answer(201));
    const idempotentFetch = createIdempotentFetch({ fetch });
    const aborted = new Request(ORDERS, { ...post(), signal: AbortSignal.abort() });
    await expect(idempotentFetch(aborted)).rejects.toMatchObject({ name: 'AbortError' });
    expect((await idempotentFetch(aborted, { signal: null })).status).toBe(201);
    expect(sent).toHaveLength(1);
  });
});
