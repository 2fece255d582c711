/**
 * Review: what happens when Nest tears the interceptor's observable down (an outer timeout interceptor, a
 * client that leaves while a handler's Observable runs), and controller inheritance.
 */
import { IdempotencyModule, Idempotent } from '@idem/adapter-nestjs';
import { createMemoryStore } from '@idem/store-memory';
import {
  type CallHandler,
  Controller,
  type ExecutionContext,
  Injectable,
  Module,
  type NestInterceptor,
  Post,
  RequestTimeoutException,
} from '@nestjs/common';
import { APP_INTERCEPTOR } from '@nestjs/core';
import 'reflect-metadata';
import { catchError, map, type Observable, TimeoutError, throwError, timeout, timer } from 'rxjs';
import { v7 } from 'uuid';
import { afterEach, describe, expect, test } from 'vitest';
import { closeApps, counting, platforms, post, sleep, startApp } from './review-helpers.js';

afterEach(closeApps);

@Injectable()
class TimeoutInterceptor implements NestInterceptor {
  intercept(_context: ExecutionContext, next: CallHandler): Observable<unknown> {
    return next.handle().pipe(
      timeout(150),
      catchError((error) =>
        throwError(() => (error instanceof TimeoutError ? new RequestTimeoutException() : error)),
      ),
    );
  }
}

describe.each(platforms)('teardown on platform-%s', (platform) => {
  test('an outer timeout interceptor answering 408 while the key is being reserved: the handler must not run later, and the key must not stay in flight', async () => {
    let runs = 0;
    @Controller()
    class C {
      @Post('work')
      work() {
        runs++;
        return { run: runs };
      }
    }
    const { store } = counting(createMemoryStore(), 400); // a slow reserve: 400 ms
    @Module({
      // Registered first: Nest applies it outside the idempotency interceptor.
      providers: [{ provide: APP_INTERCEPTOR, useClass: TimeoutInterceptor }],
      imports: [IdempotencyModule.forRoot({ store, leaseMs: 300 })],
      controllers: [C],
    })
    class AppModule {}
    const { url } = await startApp(platform, AppModule);
    const key = v7();
    const first = await post(`${url}/work`, key);
    expect(first.status).toBe(408);
    await sleep(1_200);
    // The client was told 408 (released by the rules: retryable). Nothing must run behind its back...
    expect(runs).toBe(0);
    // ...and its retry must be able to run (408 is released), not be refused as in progress.
    const retry = await post(`${url}/work`, key);
    expect(retry.status).not.toBe(409);
  });

  test('a handler Observable torn down by Nest when the client leaves: the key must not stay in flight for good', async () => {
    let runs = 0;
    @Controller()
    class C {
      @Post('obs')
      obs() {
        runs++;
        return timer(500).pipe(map(() => ({ run: runs })));
      }
    }
    const { store, counts } = counting(createMemoryStore());
    @Module({
      imports: [IdempotencyModule.forRoot({ store, leaseMs: 300 })],
      controllers: [C],
    })
    class AppModule {}
    const { url } = await startApp(platform, AppModule);
    const key = v7();
    const abort = new AbortController();
    const pending = post(`${url}/obs`, key, {}, { signal: abort.signal }).catch(() => 'aborted');
    await sleep(100);
    abort.abort();
    expect(await pending).toBe('aborted');
    // Nest unsubscribes the handler's Observable on disconnect: nothing is ever written. Wait well past the
    // Observable (500 ms) and several leases (300 ms each).
    await sleep(1_500);
    expect(runs).toBe(1);
    // The key is never settled, so the heartbeat keeps renewing it and every retry is refused as in
    // progress, for good (no maxExecutionMs by default).
    const retry = await post(`${url}/obs`, key);
    expect(retry.status).not.toBe(409);
    // Neither finalized nor released.
    expect(counts.finalize + counts.release).toBeGreaterThan(0);
  });
});

// Controller inheritance: a generic base controller whose handler two subclasses share.
class BaseCrud {
  runs = 0;
  @Post()
  create() {
    this.runs++;
    return { run: this.runs };
  }
}
@Controller('hooks')
@Idempotent(false)
class HooksController extends BaseCrud {}
@Controller('orders')
class OrdersController extends BaseCrud {}

describe.each(platforms)('controller inheritance on platform-%s', (platform) => {
  test('class-level @Idempotent(false) on one subclass must not turn idempotency off for another subclass', async () => {
    @Module({
      imports: [IdempotencyModule.forRoot({ store: createMemoryStore() })],
      controllers: [HooksController, OrdersController],
    })
    class AppModule {}
    const { url } = await startApp(platform, AppModule);
    // The uncovered controller is hit first...
    const hook = v7();
    await post(`${url}/hooks`, hook);
    expect((await post(`${url}/hooks`, hook)).headers.get('idempotent-replayed')).toBeNull();
    // ...then the covered one, whose handler is the same function (BaseCrud.prototype.create).
    const key = v7();
    const first = await post(`${url}/orders`, key);
    expect(first.status).toBe(201);
    const retry = await post(`${url}/orders`, key);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(await retry.json()).toEqual(await first.json());
  });

  test('the other order: a covered subclass first must not cover the @Idempotent(false) one', async () => {
    @Module({
      imports: [IdempotencyModule.forRoot({ store: createMemoryStore() })],
      controllers: [HooksController, OrdersController],
    })
    class AppModule {}
    const { url } = await startApp(platform, AppModule);
    const key = v7();
    await post(`${url}/orders`, key);
    expect((await post(`${url}/orders`, key)).headers.get('idempotent-replayed')).toBe('true');
    const hook = v7();
    await post(`${url}/hooks`, hook);
    expect((await post(`${url}/hooks`, hook)).headers.get('idempotent-replayed')).toBeNull();
  });
});
