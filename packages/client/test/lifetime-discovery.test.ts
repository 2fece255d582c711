import { callOutcome, createIdempotentFetch, isIdemClientError, parseIsoDurationMs } from '@idem/client';
import { describe, expect, test } from 'vitest';
import { answer, fast, networkError, post, type Sent, scriptedFetch } from './support/fake-fetch.js';

const CATALOG = 'http://127.0.0.1:9/catalog';

describe('parseIsoDurationMs', () => {
  test.each([
    ['PT30M', 1_800_000],
    ['PT24H', 86_400_000],
    ['P1D', 86_400_000],
    ['PT1H30M', 5_400_000],
    ['PT0.5S', 500],
    ['P1W', 604_800_000],
    ['P1M', 28 * 86_400_000], // the shortest month: a lifetime read short is safe
    ['PT0S', 0],
  ])('%s → %d ms', (text, ms) => {
    expect(parseIsoDurationMs(text)).toBe(ms);
  });

  test.each(['', 'P', 'PT', '30M', 'PT-5M', 'pt30m', 'P1DT', 'PT30M '])('%j is refused', (text) => {
    expect(parseIsoDurationMs(text)).toBeUndefined();
  });
});

/** A catalog whose /v1/config answers `config` (or the given steps) and whose mutations answer `mutation`. */
function catalog(config: () => Response | Error, mutation: (sent: Sent) => Response | Error) {
  return scriptedFetch((sent) => (sent.url.endsWith('/v1/config') ? config() : mutation(sent)));
}

describe('discoverKeyLifetime reads idempotency-key-lifetime from the catalog once', () => {
  test('the advertised lifetime bounds the retries', async () => {
    const { fetch, sent } = catalog(
      () => answer(200, { defaults: {}, overrides: {}, 'idempotency-key-lifetime': 'PT0.05S' }),
      () => answer(503),
    );
    const idempotentFetch = createIdempotentFetch({
      fetch,
      baseDelayMs: 5,
      maxDelayMs: 5,
      maxAttempts: 1000,
      discoverKeyLifetime: CATALOG,
    });
    const response = await idempotentFetch(`${CATALOG}/v1/namespaces`, post());
    expect(callOutcome(response)?.gaveUp).toBe('key-lifetime');
    expect(sent[0]?.url).toBe(`${CATALOG}/v1/config`);
    expect(callOutcome(response)?.elapsedMs).toBeLessThan(1000);
  });

  test('read once for every call, concurrent first calls included; carries the Authorization', async () => {
    const { fetch, sent } = catalog(
      () => answer(200, { defaults: {}, overrides: {}, 'idempotency-key-lifetime': 'PT30M' }),
      () => answer(200),
    );
    const idempotentFetch = createIdempotentFetch({ fetch, discoverKeyLifetime: `${CATALOG}/` });
    const init = { ...post(), headers: { authorization: 'Bearer t' } };
    await Promise.all([1, 2, 3].map(() => idempotentFetch(`${CATALOG}/v1/namespaces`, init)));
    await idempotentFetch(`${CATALOG}/v1/namespaces`, init);
    const configReads = sent.filter((s) => s.url.endsWith('/v1/config'));
    expect(configReads).toHaveLength(1);
    expect(configReads[0]?.url).toBe(`${CATALOG}/v1/config`);
    expect(configReads[0]?.headers.get('authorization')).toBe('Bearer t');
    expect(sent.filter((s) => s.method === 'POST')).toHaveLength(4);
  });

  test('no lifetime advertised: the catalog ignores keys, so mutations go once and without one', async () => {
    const { fetch, sent } = catalog(
      () => answer(200, { defaults: {}, overrides: {} }),
      () => answer(503),
    );
    const idempotentFetch = createIdempotentFetch({ fetch, ...fast, discoverKeyLifetime: CATALOG });
    const response = await idempotentFetch(`${CATALOG}/v1/namespaces`, post());
    expect(response.status).toBe(503);
    expect(callOutcome(response)?.gaveUp).toBe('keys-unsupported');
    const posts = sent.filter((s) => s.method === 'POST');
    expect(posts).toHaveLength(1);
    expect(posts[0]?.headers.has('idempotency-key')).toBe(false);
    // Reads are still retried.
    expect((await idempotentFetch(`${CATALOG}/v1/namespaces`)).status).toBe(503);
  });

  test('a config read that fails fails the call with IDEMPOTENCY_LIFETIME_UNKNOWN; the next call reads again', async () => {
    const configAnswers = [() => answer(500), () => answer(200, { 'idempotency-key-lifetime': 'PT1H' })];
    const { fetch, sent } = catalog(
      () => (configAnswers.shift() as () => Response)(),
      () => answer(201),
    );
    const idempotentFetch = createIdempotentFetch({ fetch, ...fast, discoverKeyLifetime: CATALOG });
    const error = await idempotentFetch(`${CATALOG}/v1/namespaces`, post()).catch((e: unknown) => e);
    expect(isIdemClientError(error) && error.code).toBe('IDEMPOTENCY_LIFETIME_UNKNOWN');
    expect(sent.filter((s) => s.method === 'POST')).toHaveLength(0); // nothing sent without a lifetime
    expect((await idempotentFetch(`${CATALOG}/v1/namespaces`, post())).status).toBe(201);
  });

  test('the config read is retried like any safe request; a malformed lifetime is an error', async () => {
    const flaky = catalog(
      (() => {
        let n = 0;
        return () => (n++ < 2 ? networkError() : answer(200, { 'idempotency-key-lifetime': 'PT1H' }));
      })(),
      () => answer(201),
    );
    const call = createIdempotentFetch({ fetch: flaky.fetch, ...fast, discoverKeyLifetime: CATALOG });
    expect((await call(`${CATALOG}/v1/namespaces`, post())).status).toBe(201);
    const malformed = catalog(
      () => answer(200, { 'idempotency-key-lifetime': '30 minutes' }),
      () => answer(201),
    );
    const refused = createIdempotentFetch({ fetch: malformed.fetch, ...fast, discoverKeyLifetime: CATALOG });
    await expect(refused(`${CATALOG}/v1/namespaces`, post())).rejects.toThrow(/not an ISO-8601 duration/);
  });

  test('a read shared by two calls goes on when one of them aborts', async () => {
    let open!: () => void;
    const gate = new Promise<void>((resolve) => {
      open = resolve;
    });
    const { fetch, sent } = scriptedFetch(async (attempt) => {
      if (!attempt.url.endsWith('/v1/config')) return answer(201);
      await gate;
      return answer(200, { 'idempotency-key-lifetime': 'PT1H' });
    });
    const idempotentFetch = createIdempotentFetch({ fetch, ...fast, discoverKeyLifetime: CATALOG });
    const leaving = new AbortController();
    const first = idempotentFetch(`${CATALOG}/v1/namespaces`, { ...post(), signal: leaving.signal });
    const second = idempotentFetch(`${CATALOG}/v1/namespaces`, post());
    await new Promise((resolve) => setTimeout(resolve, 10));
    leaving.abort(new Error('first caller left'));
    await expect(first).rejects.toThrow('first caller left');
    const configRead = sent.find((s) => s.url.endsWith('/v1/config'));
    expect(configRead?.signal?.aborted).toBe(false); // the second call still waits for it
    open();
    expect((await second).status).toBe(201);
  });

  test('a read whose every caller aborted is aborted (nothing of it goes on), and the next call reads again', async () => {
    let reads = 0;
    const { fetch, sent } = scriptedFetch((attempt) => {
      if (!attempt.url.endsWith('/v1/config')) return answer(201);
      if (++reads > 1) return answer(200, { 'idempotency-key-lifetime': 'PT1H' });
      // The first read answers only when it is aborted.
      return new Promise<Error>((resolve) => {
        attempt.signal?.addEventListener('abort', () => resolve(new DOMException('gone', 'AbortError')));
      });
    });
    const idempotentFetch = createIdempotentFetch({ fetch, ...fast, discoverKeyLifetime: CATALOG });
    const controller = new AbortController();
    const call = idempotentFetch(`${CATALOG}/v1/namespaces`, { ...post(), signal: controller.signal });
    await new Promise((resolve) => setTimeout(resolve, 10));
    controller.abort('left');
    await expect(call).rejects.toBe('left');
    expect(sent[0]?.signal?.aborted).toBe(true);
    expect((await idempotentFetch(`${CATALOG}/v1/namespaces`, post())).status).toBe(201);
    expect(reads).toBe(2);
  });

  test('an abort while the lifetime is being read rejects at once', async () => {
    const { fetch } = catalog(
      () => networkError(),
      () => answer(201),
    );
    const idempotentFetch = createIdempotentFetch({
      fetch,
      baseDelayMs: 10_000,
      random: () => 1,
      discoverKeyLifetime: CATALOG,
    });
    const controller = new AbortController();
    const call = idempotentFetch(`${CATALOG}/v1/namespaces`, { ...post(), signal: controller.signal });
    setTimeout(() => controller.abort(), 30);
    await expect(call).rejects.toMatchObject({ name: 'AbortError' });
  });
});
