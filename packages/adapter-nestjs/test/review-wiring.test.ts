/** Review: module wiring, non-HTTP contexts, precedence, concurrency. */
import { IdempotencyInterceptor, IdempotencyModule, Idempotent } from '@idem/adapter-nestjs';
import { stores } from '@idem/adapter-suite';
import type { IdempotencyStore } from '@idem/core';
import { createMemoryStore } from '@idem/store-memory';
import { Controller, type ExecutionContext, Injectable, Module, Post } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import 'reflect-metadata';
import { lastValueFrom, of } from 'rxjs';
import { v7 } from 'uuid';
import { afterEach, describe, expect, test } from 'vitest';
import { closeApps, platforms, post, sleep, startApp } from './review-helpers.js';

afterEach(closeApps);

let runs = 0;

@Controller()
class C {
  @Post('work')
  async work() {
    runs++;
    await sleep(100);
    return { run: runs };
  }
}

const STORE = Symbol('store');
@Injectable()
class StoreHolder {
  readonly store = createMemoryStore();
}
@Module({
  providers: [
    StoreHolder,
    { provide: STORE, useFactory: (h: StoreHolder) => h.store, inject: [StoreHolder] },
  ],
  exports: [STORE],
})
class StoreModule {}

describe.each(platforms)('wiring on platform-%s', (platform) => {
  test('forRootAsync with inject of a provider from an imported module', async () => {
    runs = 0;
    let injected: unknown;
    @Module({
      imports: [
        IdempotencyModule.forRootAsync({
          imports: [StoreModule],
          inject: [STORE],
          useFactory: (store: IdempotencyStore) => {
            injected = store;
            return { store };
          },
        }),
      ],
      controllers: [C],
    })
    class AppModule {}
    const { url } = await startApp(platform, AppModule);
    expect(injected).toBeDefined();
    const key = v7();
    await post(`${url}/work`, key);
    expect((await post(`${url}/work`, key)).headers.get('idempotent-replayed')).toBe('true');
    expect(runs).toBe(1);
  });

  test('providers wrapped in a proxy by an instance decorator (the `instrument` option): a keyed request runs once and replays', async () => {
    runs = 0;
    let wrapped = 0;
    @Module({ imports: [IdempotencyModule.forRoot({ store: createMemoryStore() })], controllers: [C] })
    class AppModule {}
    const { url } = await startApp(platform, AppModule, {
      instrument: {
        instanceDecorator: (instance) => {
          if (!(instance instanceof IdempotencyInterceptor)) return instance;
          wrapped++;
          return new Proxy(instance, {});
        },
      },
    });
    expect(wrapped).toBeGreaterThan(0);
    const key = v7();
    const first = await post(`${url}/work`, key);
    expect(first.status).toBe(201);
    const retry = await post(`${url}/work`, key);
    expect(retry.status).toBe(201);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(await retry.json()).toEqual(await first.json());
    expect(runs).toBe(1);
  });

  test('two forRoot imports over one store: a keyed request is not refused by the other interceptor', async () => {
    runs = 0;
    const store = createMemoryStore();
    @Module({ imports: [IdempotencyModule.forRoot({ store, lifetimeMs: 60_000 })] })
    class A {}
    @Module({ imports: [IdempotencyModule.forRoot({ store, lifetimeMs: 120_000 })] })
    class B {}
    @Module({ imports: [A, B], controllers: [C] })
    class AppModule {}
    const { url } = await startApp(platform, AppModule);
    const key = v7();
    const first = await post(`${url}/work`, key);
    expect(first.status).toBe(201);
    expect(runs).toBe(1);
  });

  test('class-level options and handler-level options: the handler overrides, the class still applies', async () => {
    @Controller('p')
    @Idempotent({ statuses: { keyReused: 409 } })
    class P {
      @Post('a')
      @Idempotent({ lifetimeMs: 60_000 })
      a() {
        return { ok: true };
      }
      @Post('off')
      @Idempotent(false)
      off() {
        return { ok: true };
      }
    }
    @Controller('q')
    @Idempotent(false)
    class Q {
      @Post('on')
      @Idempotent()
      on() {
        return { at: performance.now() };
      }
    }
    @Module({ imports: [IdempotencyModule.forRoot({ store: createMemoryStore() })], controllers: [P, Q] })
    class AppModule {}
    const { url } = await startApp(platform, AppModule);
    // handler-level @Idempotent() on a class that turned it off: covered
    const on = v7();
    await post(`${url}/q/on`, on);
    expect((await post(`${url}/q/on`, on)).headers.get('idempotent-replayed')).toBe('true');
    // handler-level @Idempotent(false): off
    const off = v7();
    await post(`${url}/p/off`, off);
    expect((await post(`${url}/p/off`, off)).headers.get('idempotent-replayed')).toBeNull();
    // handler sets lifetimeMs only: the class's keyReused: 409 should still apply (merged)
    const key = v7();
    await post(`${url}/p/a`, key, { x: 1 });
    expect((await post(`${url}/p/a`, key, { x: 2 })).status).toBe(409);
  });
});

describe('non-HTTP contexts', () => {
  test.each(['rpc', 'ws', 'graphql'])(
    'a %s context passes through without touching the store',
    async (type) => {
      let calls = 0;
      const base = createMemoryStore();
      const store = {
        ...base,
        reserve: (p: Parameters<typeof base.reserve>[0]) => {
          calls++;
          return base.reserve(p);
        },
      };
      const interceptor = new IdempotencyInterceptor({ store }, new Reflector());
      const handler = () => undefined;
      const context = {
        getType: () => type,
        getHandler: () => handler,
        getClass: () => C,
        switchToHttp: () => ({ getRequest: () => undefined, getResponse: () => undefined }),
        switchToRpc: () => ({ getData: () => ({ method: 'POST' }), getContext: () => ({}) }),
        getArgs: () => [{ method: 'POST', headers: { 'idempotency-key': v7() } }, {}],
        getArgByIndex: (i: number) => [{}, {}][i],
      } as unknown as ExecutionContext;
      const out = await lastValueFrom(interceptor.intercept(context, { handle: () => of('ok') }));
      expect(out).toBe('ok');
      expect(calls).toBe(0);
    },
  );
});

describe('the interceptor reached other than as Nest made it', () => {
  /** An HTTP context of a GET (not covered): the interceptor looks up the handler's coordinator, then passes. */
  const getContext = () => {
    const handler = () => undefined;
    return {
      getType: () => 'http',
      getHandler: () => handler,
      getClass: () => C,
      switchToHttp: () => ({ getRequest: () => ({ method: 'GET', headers: {} }), getResponse: () => ({}) }),
    } as unknown as ExecutionContext;
  };
  const made = () => new IdempotencyInterceptor({ store: createMemoryStore() }, new Reflector());

  test.each([
    ['a proxy of it', (interceptor: IdempotencyInterceptor) => new Proxy(interceptor, {})],
    // What Nest's injector does for a provider whose constructor takes a forward reference.
    [
      'a copy of its own properties',
      (interceptor: IdempotencyInterceptor) =>
        Object.assign(Object.create(IdempotencyInterceptor.prototype), interceptor) as IdempotencyInterceptor,
    ],
  ])('%s intercepts as it does', async (_name, reach) => {
    const out = await lastValueFrom(reach(made()).intercept(getContext(), { handle: () => of('ok') }));
    expect(out).toBe('ok');
  });
});

/** The SQLite store the shared suites use (a fresh in-memory database). */
async function sqliteStore(): Promise<IdempotencyStore> {
  const make = stores['SQLite (store-sql)'];
  if (make === undefined) throw new Error('no SQLite store in the suite');
  return make();
}

describe.each(platforms)('concurrency on platform-%s', (platform) => {
  test.each([
    ['memory', 'reject'],
    ['sqlite', 'reject'],
    ['memory', 'wait'],
    ['sqlite', 'wait'],
  ] as const)(
    '20 concurrent requests with one key (%s, %s): the handler runs once',
    async (kind, strategy) => {
      runs = 0;
      const store = kind === 'memory' ? createMemoryStore() : await sqliteStore();
      @Module({
        imports: [
          IdempotencyModule.forRoot({
            store,
            inFlight: strategy === 'wait' ? { strategy: 'wait', maxWaitMs: 5_000 } : { strategy: 'reject' },
          }),
        ],
        controllers: [C],
      })
      class AppModule {}
      const { url } = await startApp(platform, AppModule);
      const key = v7();
      const answers = await Promise.all(Array.from({ length: 20 }, () => post(`${url}/work`, key, { a: 1 })));
      const statuses = answers.map((r) => r.status);
      expect(runs).toBe(1);
      if (strategy === 'reject') {
        // One execution; a duplicate meets it in flight (409) or, once it is answered, replayed.
        const replayed = answers.map((r) => r.headers.get('idempotent-replayed') === 'true');
        expect(statuses.filter((s, i) => s === 201 && !replayed[i])).toHaveLength(1);
        expect(statuses.every((s) => s === 409 || s === 201)).toBe(true);
        expect(statuses.filter((s) => s === 409).length + replayed.filter(Boolean).length).toBe(19);
      } else {
        expect(statuses.every((s) => s === 201)).toBe(true);
        const bodies = await Promise.all(answers.map((r) => r.text()));
        expect(new Set(bodies).size).toBe(1);
      }
      await store.close?.();
    },
  );
});
