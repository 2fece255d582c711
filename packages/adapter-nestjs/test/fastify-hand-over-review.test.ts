/**
 * A review of the platform-fastify hand-over found these: answers written on `reply.raw` without a hijack, a
 * route whose module hook another plugin removed, and a later async onSend hook at work when the client leaves.
 */
import { request as httpRequest } from 'node:http';
import { Readable } from 'node:stream';
import { IdempotencyModule } from '@idem/adapter-nestjs';
import { createMemoryStore } from '@idem/store-memory';
import { Controller, type INestApplication, Module, Post, Res, StreamableFile } from '@nestjs/common';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import type { FastifyInstance, FastifyReply, RouteOptions } from 'fastify';
import 'reflect-metadata';
import { v7 } from 'uuid';
import { afterEach, describe, expect, test, vi } from 'vitest';
import { closeApps, counting, post, sleep, startApp } from './review-helpers.js';

afterEach(closeApps);

let runs = 0;
@Controller()
class C {
  @Post('json') json() {
    runs++;
    return { run: runs };
  }
  @Post('file') file() {
    runs++;
    return new StreamableFile(Readable.from([`file ${runs} `, 'end']));
  }
  // An explicit head with a status alone, then the body.
  @Post('head-then-end') headThenEnd(@Res() reply: FastifyReply) {
    runs++;
    reply.raw.writeHead(200);
    reply.raw.end(`raw ${runs}`);
  }
  // Headers set, then end(body): Node writes the head inside end.
  @Post('set-then-end') setThenEnd(@Res() reply: FastifyReply) {
    runs++;
    reply.raw.statusCode = 200;
    reply.raw.setHeader('content-type', 'text/plain');
    reply.raw.end(`raw ${runs}`);
  }
}

const fastifyOf = (app: INestApplication): FastifyInstance =>
  (app as NestFastifyApplication).getHttpAdapter().getInstance() as unknown as FastifyInstance;
const isReplay = (reply: FastifyReply) => reply.getHeader('idempotent-replayed') !== undefined;

async function start(setup?: (app: INestApplication) => void) {
  const counted = counting(createMemoryStore());
  @Module({ imports: [IdempotencyModule.forRoot({ store: counted.store })], controllers: [C] })
  class M {}
  const { url } = await startApp('fastify', M, setup === undefined ? {} : { setup });
  runs = 0;
  return { url, counts: counted.counts };
}

/** A keyed POST the client drops after `ms`. */
function leaveAfter(url: string, key: string, ms: number): Promise<void> {
  return new Promise((resolve) => {
    const u = new URL(url);
    const req = httpRequest({
      host: u.hostname,
      port: u.port,
      path: u.pathname,
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': key },
    });
    req.on('error', () => undefined);
    req.end('{"x":1}');
    setTimeout(() => {
      req.destroy();
      resolve();
    }, ms);
  });
}

describe('F1: a response the app writes on reply.raw without hijack', () => {
  test.each(['head-then-end', 'set-then-end'])('%s: the replay is byte-identical', async (path) => {
    const { url } = await start();
    const key = v7();
    const first = await post(`${url}/${path}`, key, { x: 1 });
    const firstText = await first.text();
    expect(firstText).toBe('raw 1');
    const retry = await post(`${url}/${path}`, key, { x: 1 });
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(retry.headers.get('idempotent-replay-body-omitted')).toBeNull(); // got 'true'
    expect(await retry.text()).toBe(firstText); // got ''
    expect(runs).toBe(1);
  });
});

describe('F2: a later onRoute hook that sets route.onSend (drops the module hand-over hook)', () => {
  test('a StreamableFile is replayed whole', async () => {
    const { url } = await start((app) =>
      fastifyOf(app).addHook('onRoute', (route: RouteOptions) => {
        const own = (_q: unknown, _r: unknown, p: unknown, done: (e: null, p: unknown) => void) =>
          done(null, p);
        route.onSend = own as never;
      }),
    );
    const key = v7();
    const first = await post(`${url}/file`, key, { x: 1 });
    expect(await first.text()).toBe('file 1 end');
    const retry = await post(`${url}/file`, key, { x: 1 });
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(retry.headers.get('idempotent-replay-body-omitted')).toBeNull(); // got 'true'
    expect(await retry.text()).toBe('file 1 end'); // got ''
  });
});

describe('F3: the client leaves while an async onSend hook after the hand-over is at work', () => {
  /** A route hook added after the module (so after its hand-over), async. */
  const laterAsyncHook =
    (work: (reply: FastifyReply, payload: unknown) => Promise<unknown>) => (app: INestApplication) =>
      fastifyOf(app).addHook('onRoute', (route: RouteOptions) => {
        route.onSend = [
          ...[route.onSend ?? []].flat(),
          async (_q: unknown, reply: FastifyReply, payload: unknown) =>
            isReplay(reply) ? payload : work(reply, payload),
        ] as never;
      });

  test('the hook passes the payload on: the replay has the body', async () => {
    const { url } = await start(
      laterAsyncHook(async (_r, p) => {
        await sleep(150);
        return p;
      }),
    );
    const key = v7();
    await leaveAfter(`${url}/json`, key, 40);
    await sleep(400);
    const retry = await post(`${url}/json`, key, { x: 1 });
    expect(retry.status).toBe(201);
    expect(retry.headers.get('idempotent-replay-body-omitted')).toBeNull(); // got 'true'
    expect(retry.headers.get('content-type')).toBe('application/json; charset=utf-8'); // got null
    expect(await retry.text()).toBe('{"run":1}'); // got ''
    expect(runs).toBe(1);
  });

  test('the hook fails (a fault, 500): the key is released, the retry runs the handler', async () => {
    const { url, counts } = await start(
      laterAsyncHook(async () => {
        await sleep(150);
        throw new Error('hook fault');
      }),
    );
    const key = v7();
    await leaveAfter(`${url}/json`, key, 40);
    // Released once Fastify has given up the fault's answer to a client that is gone (not stored as a 201).
    await vi.waitFor(() => expect(counts.release).toBe(1), { timeout: 5_000 });
    expect(counts.finalize).toBe(0);
    const retry = await post(`${url}/json`, key, { x: 1 });
    expect(retry.headers.get('idempotent-replayed')).toBeNull(); // got 'true' (a 201 with no body)
    expect(retry.status).toBe(500);
    expect(runs).toBe(2);
  });

  test('the hook sets the status: the replay has the status that was answered', async () => {
    const { url } = await start(
      laterAsyncHook(async (reply, p) => {
        await sleep(150);
        reply.code(202);
        return p;
      }),
    );
    const key = v7();
    await leaveAfter(`${url}/json`, key, 40);
    await sleep(400);
    const retry = await post(`${url}/json`, key, { x: 1 });
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(retry.status).toBe(202); // got 201
  });
});
