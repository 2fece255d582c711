import { IdempotencyModule } from '@idem/adapter-nestjs';
import { createMemoryStore } from '@idem/store-memory';
import { Controller, type DynamicModule, Header, HttpCode, Post, Res } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import 'reflect-metadata';
import { v7 } from 'uuid';
import { afterEach, expect, test } from 'vitest';
import { closeApps, post, startApp } from './review-helpers.js';

// platform-fastify: the headers read by name from the reply are those that copying every header
// (`reply.getHeaders()`) and filtering it by the allow-list gives, a name like `constructor` included.
afterEach(closeApps);

let last: FastifyReply | undefined;
@Controller()
class C {
  @Post('h')
  @HttpCode(201)
  @Header('X-Deco', 'd')
  @Header('Location', '/h/1')
  h(@Res({ passthrough: true }) reply: FastifyReply) {
    last = reply;
    reply.raw.setHeader('X-Raw', ['a', 'b']);
    reply.header('x-gone', '1');
    reply.removeHeader('x-gone');
    return { ok: true };
  }
}

test.each([[['content-type', 'location', 'x-deco', 'X-RAW', 'x-gone']], [['content-type', 'constructor']]])(
  'nest platform-fastify stored headers, allow-list %j',
  async (replayHeaders) => {
    const store = createMemoryStore({ sweepIntervalMs: false });
    const module: DynamicModule = {
      module: class M {},
      imports: [IdempotencyModule.forRoot({ store, replayHeaders })],
      controllers: [C],
    };
    const { url } = await startApp('fastify', module as never);
    const key = v7();
    const first = await post(`${url}/h`, key, { x: 1 });
    await first.text();
    await new Promise((r) => setTimeout(r, 20));
    const record = await store.load({ scope: '', key });
    const allow = new Set(replayHeaders.map((h) => h.toLowerCase()));
    const all = (last as FastifyReply).getHeaders() as Record<string, unknown>;
    const oracle: Record<string, string> = {};
    for (const name of Object.keys(all))
      if (allow.has(name) && all[name] !== undefined)
        oracle[name] = Array.isArray(all[name]) ? (all[name] as string[]).join(', ') : String(all[name]);
    expect(record?.response?.headers).toEqual(oracle);
    const replay = await post(`${url}/h`, key, { x: 1 });
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(replay.headers.get('constructor')).toBeNull();
    expect(await replay.json()).toEqual({ ok: true });
  },
);
