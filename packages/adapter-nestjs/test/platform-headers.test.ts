/**
 * Headers the platform holds for the response before the interceptor runs (a Fastify `onRequest` hook's
 * `reply.header`, an Express middleware's `res.setHeader`: a request id, CORS) go out on every answer of a
 * keyed request: the first one, its replays and the refusals, as on an unkeyed one.
 */
import { IdempotencyModule } from '@idem/adapter-nestjs';
import { createMemoryStore } from '@idem/store-memory';
import { Controller, type INestApplication, Module, Post } from '@nestjs/common';
import type { NestExpressApplication } from '@nestjs/platform-express';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import 'reflect-metadata';
import { v7 } from 'uuid';
import { afterEach, describe, expect, test } from 'vitest';
import { closeApps, platforms, post, startApp } from './review-helpers.js';

afterEach(closeApps);

let runs = 0;
@Controller()
class Orders {
  @Post('orders')
  create() {
    runs++;
    return { run: runs };
  }
}
@Module({ imports: [IdempotencyModule.forRoot({ store: createMemoryStore() })], controllers: [Orders] })
class AppModule {}

/** Every response gets `x-request-id: <n>` and `access-control-allow-origin: *` from the platform itself. */
function holdHeaders(app: INestApplication): void {
  let requests = 0;
  const fastify = (app as NestFastifyApplication).getHttpAdapter().getInstance?.();
  if (fastify !== undefined && 'addHook' in fastify) {
    fastify.addHook('onRequest', (_request, reply, done) => {
      reply.header('x-request-id', String(++requests)).header('access-control-allow-origin', '*');
      done();
    });
    return;
  }
  (app as NestExpressApplication).use(
    (_req: unknown, res: { setHeader(n: string, v: string): void }, next: () => void) => {
      res.setHeader('x-request-id', String(++requests));
      res.setHeader('access-control-allow-origin', '*');
      next();
    },
  );
}

describe.each(platforms)('headers the platform holds, on platform-%s', (platform) => {
  test('go out on the first answer, on replays and on refusals', async () => {
    runs = 0;
    const { url } = await startApp(platform, AppModule, { setup: holdHeaders });
    const key = v7();
    const first = await post(`${url}/orders`, key, { item: 'a' });
    expect(first.status).toBe(201);
    expect(first.headers.get('x-request-id')).toBe('1');
    const replay = await post(`${url}/orders`, key, { item: 'a' });
    expect(replay.status).toBe(201);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(await replay.json()).toEqual(await first.json());
    // This request's own header, not the stored one (the stored answer's headers are the allow-listed ones).
    expect(replay.headers.get('x-request-id')).toBe('2');
    expect(replay.headers.get('access-control-allow-origin')).toBe('*');
    const reused = await post(`${url}/orders`, key, { item: 'b' });
    expect(reused.status).toBe(422);
    expect(reused.headers.get('x-request-id')).toBe('3');
    expect(reused.headers.get('access-control-allow-origin')).toBe('*');
    const invalid = await post(`${url}/orders`, 'not-a-uuid', { item: 'a' });
    expect(invalid.status).toBe(400);
    expect(invalid.headers.get('access-control-allow-origin')).toBe('*');
    expect(runs).toBe(1);
  });
});
