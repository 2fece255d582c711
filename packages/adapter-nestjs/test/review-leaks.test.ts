/** Review: resources after many replays/refusals, and after an execution Nest tore down. */
import { IdempotencyModule } from '@idem/adapter-nestjs';
import type { IdempotencyStore } from '@idem/core';
import { createMemoryStore } from '@idem/store-memory';
import { Body, Controller, Module, Post } from '@nestjs/common';
import 'reflect-metadata';
import { map, timer } from 'rxjs';
import { v7 } from 'uuid';
import { afterEach, describe, expect, test, vi } from 'vitest';
import { closeApps, platforms, post, sleep, startApp } from './review-helpers.js';

afterEach(closeApps);

let runs = 0;
@Controller()
class C {
  @Post('work')
  work(@Body() body: unknown) {
    return { run: ++runs, body };
  }
  @Post('obs')
  obs() {
    runs++;
    return timer(400).pipe(map(() => ({ run: runs })));
  }
}

function renewCounting(store: IdempotencyStore) {
  const counts = { renew: 0 };
  return {
    counts,
    store: {
      ...store,
      renewLease: (p: Parameters<IdempotencyStore['renewLease']>[0]) => {
        counts.renew++;
        return store.renewLease(p);
      },
    },
  };
}

describe.each(platforms)('leaks on platform-%s', (platform) => {
  test('after 300 replays and 300 refusals: no unhandled error, and app.close() is prompt', async () => {
    const errors = vi.fn();
    process.on('unhandledRejection', errors);
    process.on('uncaughtException', errors);
    try {
      @Module({ imports: [IdempotencyModule.forRoot({ store: createMemoryStore() })], controllers: [C] })
      class AppModule {}
      const { app, url } = await startApp(platform, AppModule);
      const key = v7();
      await post(`${url}/work`, key, { a: 1 });
      for (let i = 0; i < 30; i++) {
        const batch = [];
        for (let j = 0; j < 10; j++) batch.push(post(`${url}/work`, key, { a: 1 }).then((r) => r.text()));
        for (let j = 0; j < 10; j++) batch.push(post(`${url}/work`, key, { a: 2 }).then((r) => r.status));
        const out = await Promise.all(batch);
        expect(out.slice(10)).toEqual(Array(10).fill(422));
      }
      await sleep(50);
      const started = performance.now();
      await app.close();
      expect(performance.now() - started).toBeLessThan(1_000);
      expect(errors).not.toHaveBeenCalled();
    } finally {
      process.off('unhandledRejection', errors);
      process.off('uncaughtException', errors);
    }
  });

  test('an execution whose handler Observable Nest tore down (client left): its lease must not be renewed for ever', async () => {
    const { store, counts } = renewCounting(createMemoryStore());
    @Module({
      imports: [IdempotencyModule.forRoot({ store, leaseMs: 300 })],
      controllers: [C],
    })
    class AppModule {}
    const { app, url } = await startApp(platform, AppModule);
    for (let i = 0; i < 5; i++) {
      const abort = new AbortController();
      const pending = post(`${url}/obs`, v7(), {}, { signal: abort.signal }).catch(() => undefined);
      await sleep(50);
      abort.abort();
      await pending;
    }
    await sleep(1_000); // well past the Observable's 400 ms: nothing is running any more
    const before = counts.renew;
    await sleep(1_000);
    const renewedMeanwhile = counts.renew - before;
    const started = performance.now();
    await app.close();
    const closeMs = performance.now() - started;
    const afterClose = counts.renew;
    await sleep(500);
    // Still renewing the leases of 5 executions that will never answer: each holds its key, its request and
    // response, and a store call per interval, for as long as the process lives (even after app.close()).
    expect({ renewedMeanwhile, renewedAfterClose: counts.renew - afterClose }).toEqual({
      renewedMeanwhile: 0,
      renewedAfterClose: 0,
    });
    // (app.close() takes 2-3 s after aborted requests with or without the module: not the adapter's.)
    expect(closeMs).toBeLessThan(5_000);
  });
});
