import type { IdempotencyStore } from '@idem/core';
import type { INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ExpressAdapter } from '@nestjs/platform-express';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import 'reflect-metadata';

export type Platform = 'express' | 'fastify';
export const platforms: Platform[] = ['express', 'fastify'];

const apps: INestApplication[] = [];
export async function closeApps(): Promise<void> {
  for (const app of apps.splice(0)) await app.close().catch(() => undefined);
}

export async function startApp(
  platform: Platform,
  AppModule: new (...args: never[]) => unknown,
  opts: {
    rawBody?: boolean;
    setup?: (app: INestApplication) => void;
    /** Nest's `instrument` option (an `instanceDecorator` that wraps every provider, say). */
    instrument?: { instanceDecorator: (instance: unknown) => unknown };
  } = {},
) {
  const adapter = platform === 'express' ? new ExpressAdapter() : new FastifyAdapter();
  const app = await NestFactory.create(AppModule, adapter as never, {
    logger: false,
    rawBody: opts.rawBody ?? true,
    ...(opts.instrument === undefined ? {} : { instrument: opts.instrument }),
  });
  opts.setup?.(app);
  await app.listen(0, '127.0.0.1');
  apps.push(app);
  const url = (await app.getUrl()).replace('[::1]', '127.0.0.1');
  return { app, url };
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Counts reserve calls, with an optional delay on reserve. */
export function counting(store: IdempotencyStore, reserveDelayMs = 0) {
  const counts = { reserve: 0, finalize: 0, release: 0 };
  const wrapped: IdempotencyStore = {
    ...store,
    reserve: async (p) => {
      counts.reserve++;
      if (reserveDelayMs > 0) await sleep(reserveDelayMs);
      return store.reserve(p);
    },
    finalize: async (p) => {
      counts.finalize++;
      return store.finalize(p);
    },
    release: async (p) => {
      counts.release++;
      return store.release(p);
    },
  };
  return { store: wrapped, counts };
}

export function post(url: string, key: string | undefined, body: unknown = {}, extra: RequestInit = {}) {
  return fetch(url, {
    method: 'POST',
    ...extra,
    headers: {
      'content-type': 'application/json',
      ...(key === undefined ? {} : { 'idempotency-key': key }),
      ...((extra.headers as Record<string, string>) ?? {}),
    },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
}
