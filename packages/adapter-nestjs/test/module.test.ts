import { IdempotencyModule, Idempotent, type NestHttpRequest } from '@idem/adapter-nestjs';
import { createMemoryStore } from '@idem/store-memory';
import {
  Body,
  type CanActivate,
  Controller,
  type ExecutionContext,
  Injectable,
  Module,
  Post,
  Req,
  UseGuards,
} from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ExpressAdapter } from '@nestjs/platform-express';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import 'reflect-metadata';
import { v7 } from 'uuid';
import { afterEach, describe, expect, test } from 'vitest';

/** An authentication guard: sets `user` from a header, as a passport guard would. */
@Injectable()
class AuthGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const request = context.switchToHttp().getRequest<NestHttpRequest>();
    request.user = { id: String(request.headers['x-user'] ?? 'anonymous') };
    return true;
  }
}

let runs = 0;

@Controller()
@UseGuards(AuthGuard)
class OrdersController {
  @Post('orders')
  create(@Body() body: { item: string }, @Req() request: NestHttpRequest) {
    return { run: ++runs, item: body.item, key: request.idempotency?.key ?? null };
  }
  @Post('payments')
  @Idempotent({ statuses: { keyReused: 409 } })
  pay(@Body() body: { amount: number }) {
    return { run: ++runs, amount: body.amount };
  }
  @Post('webhooks')
  @Idempotent(false)
  webhook() {
    return { run: ++runs };
  }
}

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0)) await close();
});

async function start(platform: 'express' | 'fastify', async_: boolean) {
  const store = createMemoryStore();
  const options = {
    store,
    scope: (request: NestHttpRequest) => (request.user as { id: string } | undefined)?.id,
  };
  @Module({
    imports: [
      async_
        ? IdempotencyModule.forRootAsync({ useFactory: async () => options })
        : IdempotencyModule.forRoot(options),
    ],
    controllers: [OrdersController],
    providers: [AuthGuard],
  })
  class AppModule {}
  const adapter = platform === 'express' ? new ExpressAdapter() : new FastifyAdapter();
  const app = await NestFactory.create(AppModule, adapter, { logger: false, rawBody: true });
  await app.listen(0, '127.0.0.1');
  closers.push(() => app.close());
  const url = (await app.getUrl()).replace('[::1]', '127.0.0.1');
  return (path: string, key: string | undefined, body: unknown, user = 'alice') =>
    fetch(url + path, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'x-user': user,
        ...(key === undefined ? {} : { 'idempotency-key': key }),
      },
      body: JSON.stringify(body),
    });
}

describe.each([
  ['express', false],
  ['fastify', false],
  ['express', true],
  ['fastify', true],
] as const)('IdempotencyModule on platform-%s (forRootAsync: %s)', (platform, async_) => {
  test('a retry replays; the scope is what the guard set; @Idempotent overrides and turns off', async () => {
    runs = 0;
    const post = await start(platform, async_);
    const key = v7();
    const first = await post('/orders', key, { item: 'book' });
    expect(first.status).toBe(201);
    const body = await first.json();
    expect(body).toMatchObject({ run: 1, item: 'book', key });
    const retry = await post('/orders', key, { item: 'book' });
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(await retry.json()).toEqual(body);
    // Another principal's same key is another request: the guard's user is the scope.
    const bob = (await (await post('/orders', key, { item: 'book' }, 'bob')).json()) as { run: number };
    expect(bob.run).toBe(2);
    expect((await post('/orders', key, { item: 'pen' })).status).toBe(422);
    const pay = v7();
    expect((await post('/payments', pay, { amount: 1 })).status).toBe(201);
    expect((await post('/payments', pay, { amount: 2 })).status).toBe(409); // the handler's own status
    const hook = v7();
    await post('/webhooks', hook, {});
    expect((await post('/webhooks', hook, {})).headers.get('idempotent-replayed')).toBeNull();
    expect(runs).toBe(5);
  });
});
