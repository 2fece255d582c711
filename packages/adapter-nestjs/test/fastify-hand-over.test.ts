/**
 * On platform-fastify the module takes the answer where Fastify hands it over (its last onSend hook), as the
 * Fastify adapter does, rather than capturing each response as it is written. Whatever another hook does to the
 * payload, before or after that hook, the key stores what went out.
 */
import { ServerResponse } from 'node:http';
import { Readable } from 'node:stream';
import { IdempotencyModule } from '@idem/adapter-nestjs';
import type { IdempotencyStore } from '@idem/core';
import { createMemoryStore } from '@idem/store-memory';
import {
  Controller,
  type DynamicModule,
  HttpException,
  type INestApplication,
  Post,
  Res,
  StreamableFile,
} from '@nestjs/common';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import type { FastifyInstance, FastifyReply, RouteOptions } from 'fastify';
import 'reflect-metadata';
import { v7 } from 'uuid';
import { afterEach, describe, expect, test } from 'vitest';
import { closeApps, post, startApp } from './review-helpers.js';

afterEach(closeApps);

let runs = 0;
/** The `end` each response had when the handler ran, by run. */
const ends: unknown[] = [];

@Controller()
class C {
  @Post('json') json(@Res({ passthrough: true }) reply: FastifyReply) {
    runs++;
    ends.push(reply.raw.end);
    return { run: runs };
  }
  @Post('conflict') conflict() {
    runs++;
    throw new HttpException({ run: runs }, 409);
  }
  @Post('fault') fault() {
    runs++;
    throw new Error('boom');
  }
  @Post('file') file() {
    runs++;
    return new StreamableFile(Readable.from([Buffer.from(`file ${runs} `), Buffer.from('end')]));
  }
  // The app writes the response itself, body first (Node.js writes the head implicitly inside `write`).
  @Post('hijacked') hijacked(@Res() reply: FastifyReply) {
    runs++;
    reply.hijack();
    reply.raw.write(`hijacked ${runs} `);
    reply.raw.end('end');
  }
}

const moduleOf = (store: IdempotencyStore): DynamicModule => ({
  module: class M {},
  imports: [IdempotencyModule.forRoot({ store })],
  controllers: [C],
});
const fastifyOf = (app: INestApplication): FastifyInstance =>
  (app as NestFastifyApplication).getHttpAdapter().getInstance() as unknown as FastifyInstance;

/** The first answer and its retry, as text. */
async function twice(url: string, path: string) {
  const key = v7();
  const first = await post(`${url}/${path}`, key, { x: 1 });
  const firstText = await first.text();
  const retry = await post(`${url}/${path}`, key, { x: 1 });
  return { first, firstText, retry, retryText: await retry.text() };
}

/** What another plugin's onSend hook does to a JSON payload, and where it runs. */
const rewrites = {
  'a string': (payload: unknown) => `{"wrapped":${String(payload)}}`,
  bytes: (payload: unknown) => Buffer.from(`{"wrapped":${String(payload)}}`),
  'a stream': (payload: unknown) => Readable.from([`{"wrapped":`, String(payload), '}']),
};
type Rewrite = (payload: unknown) => unknown;
/** The hook, which leaves replays alone (they went through it when they were first sent). */
const hookOf =
  (rewrite: Rewrite) =>
  async (_request: unknown, reply: FastifyReply, payload: unknown): Promise<unknown> =>
    reply.getHeader('idempotent-replayed') === undefined ? rewrite(payload) : payload;
const places = {
  // A global hook runs before every route's own hooks, the module's among them.
  'before the hand-over (a global hook)': (app: INestApplication, rewrite: Rewrite) =>
    fastifyOf(app).addHook('onSend', hookOf(rewrite)),
  // A route hook added by a later onRoute hook runs after the module's.
  'after the hand-over (a later route hook)': (app: INestApplication, rewrite: Rewrite) =>
    fastifyOf(app).addHook('onRoute', (route: RouteOptions) => {
      route.onSend = [...[route.onSend ?? []].flat(), hookOf(rewrite)] as NonNullable<RouteOptions['onSend']>;
    }),
};

describe('platform-fastify: the answer as Fastify hands it over', () => {
  test('responses are watched by shared functions, not captured by closures made per request', async () => {
    const { url } = await startApp('fastify', moduleOf(createMemoryStore()) as never);
    ends.length = 0;
    const { first, firstText, retry, retryText } = await twice(url, 'json');
    await twice(url, 'json');
    // The hand-over watches `end` with one function for every response; a capture of what is written wraps
    // each response's own in a closure.
    expect(ends).toHaveLength(2);
    expect(ends[0]).toBe(ends[1]);
    expect(ends[0]).not.toBe(ServerResponse.prototype.end);
    expect(first.status).toBe(201);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(retryText).toBe(firstText);
  });

  for (const [place, install] of Object.entries(places))
    for (const [kind, rewrite] of Object.entries(rewrites))
      test(`another hook makes the payload ${kind}, ${place}: the replay is what went out`, async () => {
        const { url } = await startApp('fastify', moduleOf(createMemoryStore()) as never, {
          setup: (app) => install(app, rewrite),
        });
        runs = 0;
        const { first, firstText, retry, retryText } = await twice(url, 'json');
        expect(first.status).toBe(201);
        expect(JSON.parse(firstText)).toEqual({ wrapped: { run: 1 } });
        expect(retry.status).toBe(201);
        expect(retry.headers.get('idempotent-replayed')).toBe('true');
        expect(retryText).toBe(firstText);
        expect(runs).toBe(1);
      });

  test('a refusal the handler throws (409) is stored and replayed; a fault (500) releases the key', async () => {
    const { url } = await startApp('fastify', moduleOf(createMemoryStore()) as never);
    runs = 0;
    const conflict = await twice(url, 'conflict');
    expect([conflict.first.status, conflict.retry.status]).toEqual([409, 409]);
    expect(conflict.retryText).toBe(conflict.firstText);
    expect(runs).toBe(1);
    const fault = await twice(url, 'fault');
    expect([fault.first.status, fault.retry.status]).toEqual([500, 500]);
    expect(fault.retry.headers.get('idempotent-replayed')).toBeNull();
    expect(runs).toBe(3); // a fault stores nothing: its retry ran again
  });

  test('a streamed answer (StreamableFile) is captured as it is written, and replayed whole', async () => {
    const { url } = await startApp('fastify', moduleOf(createMemoryStore()) as never);
    runs = 0;
    const { firstText, retry, retryText } = await twice(url, 'file');
    expect(firstText).toBe('file 1 end');
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(retryText).toBe('file 1 end');
    expect(runs).toBe(1);
  });

  test('a hijacked reply written body first is captured whole, its first bytes included', async () => {
    const { url } = await startApp('fastify', moduleOf(createMemoryStore()) as never);
    runs = 0;
    const { firstText, retry, retryText } = await twice(url, 'hijacked');
    expect(firstText).toBe('hijacked 1 end');
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(retryText).toBe('hijacked 1 end');
    expect(runs).toBe(1);
  });

  test('two modules on one app: one hand-over, one run, the replay whole', async () => {
    const store = createMemoryStore();
    const { url } = await startApp('fastify', {
      module: class Two {},
      imports: [IdempotencyModule.forRoot({ store }), IdempotencyModule.forRoot({ store })],
      controllers: [C],
    } as never);
    runs = 0;
    const { retry, retryText, firstText } = await twice(url, 'json');
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(retryText).toBe(firstText);
    expect(runs).toBe(1);
  });
});
