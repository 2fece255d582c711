/** Review of 8a1c68e: replays/refusals through Fastify's reply on platform-fastify. */

import { gzipSync } from 'node:zlib';
import { IdempotencyModule } from '@idem/adapter-nestjs';
import { stores } from '@idem/adapter-suite';
import type { IdempotencyStore } from '@idem/core';
import {
  Controller,
  type DynamicModule,
  Header,
  HttpCode,
  type INestApplication,
  Post,
} from '@nestjs/common';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import type { FastifyInstance } from 'fastify';
import 'reflect-metadata';
import { v7 } from 'uuid';
import { afterEach, describe, expect, test } from 'vitest';
import { closeApps, platforms, post, sleep, startApp } from './review-helpers.js';

afterEach(closeApps);

const BIN = Uint8Array.from([0, 1, 2, 255, 254, 0x1f, 0x8b, 10, 13, 0]);
let runs = 0;
@Controller()
class C {
  @Post('json') json() {
    runs++;
    return { run: runs, s: 'é€' };
  }
  @Post('bin') @Header('content-type', 'application/octet-stream') bin() {
    runs++;
    return Buffer.from(BIN);
  }
  @Post('empty') @HttpCode(204) empty() {
    runs++;
  }
  @Post('emptystr') @HttpCode(200) @Header('content-type', 'text/plain') emptystr() {
    runs++;
    return '';
  }
  @Post('gz') @Header('content-type', 'text/plain') @Header('content-encoding', 'gzip') gz() {
    runs++;
    return gzipSync('hello');
  }
  @Post('csv') @Header('content-type', 'text/csv') @Header('x-deco', 'd') csv() {
    runs++;
    return 'a,b';
  }
}
const mod = (store: IdempotencyStore, extra: object = {}): DynamicModule => ({
  module: class M {},
  imports: [IdempotencyModule.forRoot({ store, ...extra })],
  controllers: [C],
});
function fastifyOf(app: INestApplication) {
  return (app as NestFastifyApplication).getHttpAdapter().getInstance();
}
async function twice(url: string, path: string, key = v7()) {
  const a = await post(`${url}/${path}`, key, { x: 1 });
  const ab = new Uint8Array(await a.arrayBuffer());
  const b = await post(`${url}/${path}`, key, { x: 1 });
  const bb = new Uint8Array(await b.arrayBuffer());
  return { a, ab, b, bb };
}
for (const [storeName, make] of Object.entries(stores)) {
  describe.each(platforms)(`store ${storeName}, platform-%s`, (platform) => {
    // (Nest on Express sends a returned Buffer as JSON, so these bodies cannot be made there.)
    if (platform === 'fastify')
      test('binary body replay: bytes, content-type, content-length, replayed header once', async () => {
        const store = await make();
        const { url } = await startApp(platform, mod(store) as never);
        const { a, ab, b, bb } = await twice(url, 'bin');
        expect(a.status).toBe(201);
        expect(Array.from(ab)).toEqual(Array.from(BIN));
        expect(b.status).toBe(201);
        expect(Array.from(bb)).toEqual(Array.from(BIN));
        expect(b.headers.get('content-type')).toBe(a.headers.get('content-type'));
        expect(b.headers.get('content-length')).toBe(String(BIN.length));
        expect(b.headers.get('idempotent-replayed')).toBe('true');
        await store.close?.();
      });
    test('json replay equal, content-type & content-length', async () => {
      const store = await make();
      const { url } = await startApp(platform, mod(store) as never);
      const { a, ab, b, bb } = await twice(url, 'json');
      expect(Buffer.from(bb).toString()).toBe(Buffer.from(ab).toString());
      expect(b.headers.get('content-type')).toBe(a.headers.get('content-type'));
      expect(b.headers.get('content-length')).toBe(String(bb.length));
      await store.close?.();
    });
    // Replays without a body: a 204, and a 200 whose body is empty.
    test.each([
      { path: 'empty', status: 204 },
      { path: 'emptystr', status: 200 },
    ])('$status replay with no body', async ({ path, status }) => {
      const store = await make();
      const { url } = await startApp(platform, mod(store) as never);
      const { a, b, bb } = await twice(url, path);
      expect(a.status).toBe(status);
      expect(b.status).toBe(status);
      expect(bb.length).toBe(0);
      expect(b.headers.get('idempotent-replayed')).toBe('true');
      expect(b.headers.get('content-type')).toBe(a.headers.get('content-type'));
      expect(b.headers.get('content-length')).toBe(status === 204 ? a.headers.get('content-length') : '0');
      await store.close?.();
    });
  });
}

describe.each(platforms)('platform-%s misc', (platform) => {
  // (Nest on Express sends a returned Buffer as JSON, so these bodies cannot be made there.)
  if (platform === 'fastify')
    test('stored content-encoding gzip body replayed intact', async () => {
      const { createMemoryStore } = await import('@idem/store-memory');
      const { url } = await startApp(platform, mod(createMemoryStore()) as never);
      const key = v7();
      const a = await post(`${url}/gz`, key, {});
      const b = await post(`${url}/gz`, key, {});
      expect(await a.text()).toBe('hello');
      expect(b.headers.get('content-encoding')).toBe('gzip');
      expect(await b.text()).toBe('hello');
    });
  test('@Header decorator headers & refusal content-type over decorated content-type', async () => {
    const { createMemoryStore } = await import('@idem/store-memory');
    const { url } = await startApp(platform, mod(createMemoryStore()) as never);
    const key = v7();
    const a = await post(`${url}/csv`, key, { x: 1 });
    const b = await post(`${url}/csv`, key, { x: 1 });
    expect(await b.text()).toBe(await a.text());
    expect(b.headers.get('x-deco')).toBe('d');
    const r = await post(`${url}/csv`, key, { x: 2 });
    expect(r.status).toBe(422);
    expect(r.headers.get('content-type')).toMatch(/json/);
    expect(r.headers.get('x-deco')).toBe('d');
    JSON.parse(await r.text());
  });
  test('formatError refusal keeps its body and content type', async () => {
    const { createMemoryStore } = await import('@idem/store-memory');
    const formatError = (e: { code: string }) => ({ problem: e.code });
    const { url } = await startApp(platform, mod(createMemoryStore(), { formatError }) as never);
    const r = await post(`${url}/json`, 'bad', {});
    expect(r.status).toBe(400);
    expect(r.headers.get('content-type')).toMatch(/^application\/json/);
    const t = await r.text();
    expect(JSON.parse(t)).toHaveProperty('problem');
    expect(r.headers.get('content-length')).toBe(String(Buffer.byteLength(t)));
  });
  test('enableCors: CORS headers on replay and refusal', async () => {
    const { createMemoryStore } = await import('@idem/store-memory');
    const { url } = await startApp(platform, mod(createMemoryStore()) as never, {
      setup: (app) =>
        app.enableCors({ origin: 'https://a.example', exposedHeaders: ['idempotent-replayed'] }),
    });
    const key = v7();
    const h = { headers: { origin: 'https://a.example' } };
    await post(`${url}/json`, key, {}, h);
    const b = await post(`${url}/json`, key, {}, h);
    expect(b.headers.get('access-control-allow-origin')).toBe('https://a.example');
    const r = await post(`${url}/json`, key, { y: 1 }, h);
    expect(r.status).toBe(422);
    expect(r.headers.get('access-control-allow-origin')).toBe('https://a.example');
  });
  test('20 concurrent replays of one key', async () => {
    const { createMemoryStore } = await import('@idem/store-memory');
    const { url } = await startApp(platform, mod(createMemoryStore()) as never);
    const key = v7();
    runs = 0;
    const first = await (await post(`${url}/json`, key, {})).text();
    const all = await Promise.all(Array.from({ length: 20 }, () => post(`${url}/json`, key, {})));
    for (const r of all) {
      expect(r.status).toBe(201);
      expect(r.headers.get('idempotent-replayed')).toBe('true');
      // exactly once: Headers.get joins duplicates with ", "
      expect(await r.text()).toBe(first);
    }
    expect(runs).toBe(1);
  });
  test('client disconnects before the replay is sent: server stays healthy', async () => {
    const { createMemoryStore } = await import('@idem/store-memory');
    const base = createMemoryStore();
    let delay = 0;
    const store: IdempotencyStore = {
      ...base,
      reserve: async (p) => {
        if (delay) await sleep(delay);
        return base.reserve(p);
      },
    };
    const errors: unknown[] = [];
    const onErr = (e: unknown) => errors.push(e);
    process.on('unhandledRejection', onErr);
    process.on('uncaughtException', onErr);
    try {
      const { url } = await startApp(platform, mod(store) as never);
      const key = v7();
      await (await post(`${url}/json`, key, {})).text();
      delay = 150;
      const ac = new AbortController();
      const p = post(`${url}/json`, key, {}, { signal: ac.signal }).catch((e) => e);
      await sleep(50);
      ac.abort();
      await p;
      await sleep(300);
      delay = 0;
      const again = await post(`${url}/json`, key, {});
      expect(again.status).toBe(201);
      expect(again.headers.get('idempotent-replayed')).toBe('true');
      expect(errors).toEqual([]);
    } finally {
      process.off('unhandledRejection', onErr);
      process.off('uncaughtException', onErr);
    }
  });
});

describe('Fastify hooks on replays and refusals, platform-fastify (as @idem/adapter-fastify has them)', () => {
  async function start(setup: (f: FastifyInstance) => void, extra: object = {}) {
    const { createMemoryStore } = await import('@idem/store-memory');
    const { url } = await startApp('fastify', mod(createMemoryStore(), extra) as never, {
      setup: (app) => setup(fastifyOf(app)),
    });
    return { url, close: async () => {} };
  }
  test('onSend hooks run on a replay, and see its bytes', async () => {
    const seen: string[] = [];
    const { url, close } = await start((f) =>
      f.addHook('onSend', async (_q, reply, payload) => {
        seen.push(
          typeof payload === 'string' ? 'string' : Buffer.isBuffer(payload) ? 'buffer' : typeof payload,
        );
        reply.header('x-onsend', '1');
        return payload;
      }),
    );
    const key = v7();
    const a = await post(`${url}/json`, key, {});
    const b = await post(`${url}/json`, key, {});
    expect(await b.text()).toBe(await a.text());
    expect(b.headers.get('x-onsend')).toBe('1');
    expect(seen).toEqual(['string', 'buffer']); // the first answer as Fastify serialized it; the replay's bytes
    await close();
  });
  test('onSend throwing on replay -> 500, nothing hangs', async () => {
    let n = 0;
    const { url, close } = await start((f) =>
      f.addHook('onSend', async (_q: unknown, _r: unknown, payload: unknown) => {
        if (++n === 2) throw new Error('boom');
        return payload;
      }),
    );
    const key = v7();
    await (await post(`${url}/json`, key, {})).text();
    const b = await post(`${url}/json`, key, {}, { signal: AbortSignal.timeout(3000) });
    expect(b.status).toBe(500);
    await close();
  });
  test('reply.serializer set in onRequest; refusal body not double-serialized', async () => {
    const { url, close } = await start((f) =>
      f.addHook('onRequest', async (_q, reply) => {
        reply.serializer((x: unknown) => JSON.stringify(x));
      }),
    );
    const r = await post(`${url}/json`, 'not-a-uuid', {});
    const t = await r.text();
    expect(r.status).toBe(400);
    expect(typeof JSON.parse(t)).toBe('object');
    const { ab, bb } = await twice(url, 'json');
    expect(Buffer.from(bb).toString()).toBe(Buffer.from(ab).toString());
    await close();
  });
  test('preSerialization hook not run on replay (payload already bytes)', async () => {
    let calls = 0;
    const { url, close } = await start((f) =>
      f.addHook('preSerialization', async (_q, _r, payload) => {
        calls++;
        return { wrapped: payload };
      }),
    );
    const { ab, bb } = await twice(url, 'json');
    expect(Buffer.from(bb).toString()).toBe(Buffer.from(ab).toString());
    expect(calls).toBe(1); // the first answer's serialization; the replay is bytes already
    await close();
  });
});
