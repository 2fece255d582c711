/** Review: bodies and platforms, store faults and throwing hooks. */
import { IdempotencyModule, type NestIdempotencyOptions } from '@idem/adapter-nestjs';
import type { IdempotencyStore } from '@idem/core';
import { createMemoryStore } from '@idem/store-memory';
import { Body, Controller, Module, Post, Req } from '@nestjs/common';
import 'reflect-metadata';
import { v7 } from 'uuid';
import { afterEach, describe, expect, test, vi } from 'vitest';
import { closeApps, counting, platforms, post, startApp } from './review-helpers.js';

afterEach(closeApps);

let runs = 0;

@Controller()
class C {
  @Post('echo')
  echo(@Body() body: unknown, @Req() req: { headers: Record<string, unknown> }) {
    runs++;
    return { run: runs, body: body ?? null, ct: req.headers['content-type'] ?? null };
  }
}

async function app(
  platform: (typeof platforms)[number],
  options: Partial<NestIdempotencyOptions> & { store?: IdempotencyStore } = {},
  rawBody = true,
) {
  const counted = counting(options.store ?? createMemoryStore());
  @Module({
    imports: [IdempotencyModule.forRoot({ ...options, store: counted.store } as NestIdempotencyOptions)],
    controllers: [C],
  })
  class AppModule {}
  const { url } = await startApp(platform, AppModule, { rawBody });
  return { url, counts: counted.counts };
}

describe.each(platforms)('bodies on platform-%s', (platform) => {
  // Without rawBody the parsed body is all there is to hash (the README says so, as the Express adapter's does):
  // numbers that read as the same double are the same request then. With it, they are not (the test below).
  test('rawBody: false — bodies that differ only in number text replay, as documented (rawBody: true tells them apart)', async () => {
    runs = 0;
    const { url } = await app(platform, {}, false);
    const key = v7();
    expect((await post(`${url}/echo`, key, '{"amount":10.10}')).status).toBe(201);
    const other = await post(`${url}/echo`, key, '{"amount":10.1}');
    expect(other.headers.get('idempotent-replayed')).toBe('true');
  });

  test('rawBody: false — {"n":1e400} and {"n":null} are different requests (design.md: misuse)', async () => {
    runs = 0;
    const { url } = await app(platform, {}, false);
    const key = v7();
    const first = await post(`${url}/echo`, key, '{"n":1e400}');
    expect(first.status).toBe(201);
    const other = await post(`${url}/echo`, key, '{"n":null}');
    expect(other.status).toBe(422);
  });

  test('rawBody: true — bodies that differ only in number text are another request (422)', async () => {
    const { url } = await app(platform, {}, true);
    const key = v7();
    expect((await post(`${url}/echo`, key, '{"amount":10.10}')).status).toBe(201);
    expect((await post(`${url}/echo`, key, '{"amount":10.1}')).status).toBe(422);
  });

  test.each([true, false])(
    'a body no parser reads (rawBody %s): 415, nothing reserved, handler not run',
    async (rawBody) => {
      runs = 0;
      const { url, counts } = await app(platform, {}, rawBody);
      const key = v7();
      const res = await post(`${url}/echo`, key, '<x/>', { headers: { 'content-type': 'application/xml' } });
      expect(res.status).toBe(415);
      expect(counts.reserve).toBe(0);
      expect(runs).toBe(0);
    },
  );

  test('a body with no content type: not reserved, handler not run with a body it did not see', async () => {
    runs = 0;
    const { url, counts } = await app(platform);
    const key = v7();
    const res = await fetch(`${url}/echo`, {
      method: 'POST',
      headers: { 'idempotency-key': key },
      body: new Uint8Array(Buffer.from('abc')),
    });
    expect(res.status).toBe(415);
    expect(counts.reserve).toBe(0);
  });
});

describe.each(platforms)('faults on platform-%s', (platform) => {
  const failing = (mode: 'throw' | 'hang'): IdempotencyStore => {
    const base = createMemoryStore();
    const bad = () => (mode === 'throw' ? Promise.reject(new Error('down')) : new Promise<never>(() => {}));
    return { ...base, reserve: bad, load: bad, finalize: bad, release: bad, renewLease: bad };
  };

  test('a store that throws: 503 with Retry-After, handler not run', async () => {
    runs = 0;
    const { url } = await app(platform, { store: failing('throw') });
    const res = await post(`${url}/echo`, v7());
    expect(res.status).toBe(503);
    expect(res.headers.get('retry-after')).toBe('1');
    expect(runs).toBe(0);
  });

  test('a store that hangs: 503 with Retry-After within storeTimeoutMs', async () => {
    runs = 0;
    const { url } = await app(platform, { store: failing('hang'), storeTimeoutMs: 200 });
    const started = performance.now();
    const res = await post(`${url}/echo`, v7());
    expect(res.status).toBe(503);
    expect(performance.now() - started).toBeLessThan(1_000);
    expect(res.headers.get('retry-after')).not.toBeNull();
    expect(runs).toBe(0);
  });

  test("failMode: 'open': the handler runs", async () => {
    runs = 0;
    const { url } = await app(platform, { store: failing('throw'), failMode: 'open' });
    const res = await post(`${url}/echo`, v7());
    expect(res.status).toBe(201);
    expect(runs).toBe(1);
  });

  test('a throwing scope hook: an error answer, nothing reserved, no unhandled rejection', async () => {
    runs = 0;
    const unhandled = vi.fn();
    process.on('unhandledRejection', unhandled);
    try {
      const { url, counts } = await app(platform, {
        scope: () => {
          throw new Error('no scope');
        },
      });
      const res = await post(`${url}/echo`, v7());
      expect(res.status).toBe(500);
      expect(counts.reserve).toBe(0);
      expect(runs).toBe(0);
      await new Promise((r) => setTimeout(r, 50));
      expect(unhandled).not.toHaveBeenCalled();
    } finally {
      process.off('unhandledRejection', unhandled);
    }
  });

  test('a throwing formatError: the refusal still goes out with its status and a JSON body', async () => {
    const { url } = await app(platform, {
      formatError: () => {
        throw new Error('fmt');
      },
    });
    const res = await post(`${url}/echo`, 'not-a-key');
    expect(res.status).toBe(400);
    const body = (await res.json()) as { error?: { code?: string } };
    expect(body.error?.code).toBe('IDEMPOTENCY_KEY_INVALID');
  });

  test('throwing redact / rebuildReplay / onEvent: the request and its retry still work', async () => {
    runs = 0;
    const { url } = await app(platform, {
      redact: () => {
        throw new Error('redact');
      },
      rebuildReplay: () => {
        throw new Error('rebuild');
      },
      onEvent: () => {
        throw new Error('event');
      },
    });
    const key = v7();
    expect((await post(`${url}/echo`, key)).status).toBe(201);
    const retry = await post(`${url}/echo`, key);
    expect(retry.status).toBe(201);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    // redact threw: the record is the status alone, body omitted
    expect(retry.headers.get('idempotent-replay-body-omitted')).toBe('true');
    expect(runs).toBe(1);
  });
});
