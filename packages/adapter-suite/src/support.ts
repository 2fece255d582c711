import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import type { IdempotencyOptions, IdempotencyRecord, IdempotencyStore } from '@idem/core';
import { v7 } from 'uuid';
import { type Business, createBusiness } from './business.js';

/** What a test app gets: the options to hand to its adapter, and the handlers to mount (see Business). */
export interface ServerConfig {
  /**
   * Pass these to the adapter; its `scope` defaults to the `x-principal` request header. `scope` and
   * `formatError` are the adapters' own options (each calls them with its own request type).
   */
  readonly options: IdempotencyOptions & {
    readonly scope?: (request: never) => string | undefined;
    readonly formatError?: (error: never, request: never) => unknown;
  };
  readonly business: Business;
}

/** Start a listening HTTP server for one test; `close` stops it. */
export type MakeServer = (config: ServerConfig) => Promise<{ url: string; close(): Promise<void> }>;

export interface SuiteHarness {
  describe(name: string, body: () => void): unknown;
  /** `timeoutMs`, where given, replaces the runner's default for this test. */
  test(name: string, body: () => Promise<void>, timeoutMs?: number): unknown;
}

export interface Answer {
  status: number;
  headers: Headers;
  bytes: Buffer;
  json(): unknown;
}

/** A fresh UUIDv7 key, as a client mints one. */
export const newKey = (): string => v7();

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export interface CallInit {
  method?: string;
  key?: string | string[];
  /** A value sent as JSON, or the exact text of the body. */
  body?: unknown;
  rawBody?: string;
  /** The exact bytes of the body. */
  rawBytes?: Uint8Array;
  /** `''` sends no content type. @default 'application/json' */
  contentType?: string;
  principal?: string;
  signal?: AbortSignal;
  /** More request headers. */
  headers?: Record<string, string>;
}

function request(url: string, path: string, init: CallInit): Promise<Response> {
  // An empty content type sends none (a body of bytes then goes without one).
  const headers = new Headers(
    init.contentType === '' ? {} : { 'content-type': init.contentType ?? 'application/json' },
  );
  for (const key of typeof init.key === 'string' ? [init.key] : (init.key ?? []))
    headers.append('idempotency-key', key);
  if (init.principal !== undefined) headers.set('x-principal', init.principal);
  for (const [name, value] of Object.entries(init.headers ?? {})) headers.set(name, value);
  const body = init.rawBytes ?? init.rawBody ?? JSON.stringify(init.body ?? { item: 'book' });
  return fetch(url + path, {
    method: init.method ?? 'POST',
    headers,
    ...(init.method === 'GET' ? {} : { body }),
    ...(init.signal ? { signal: init.signal } : {}),
  });
}

/** Send a request and read the whole answer. */
export async function call(url: string, path: string, init: CallInit = {}): Promise<Answer> {
  const response = await request(url, path, init);
  const bytes = Buffer.from(await response.arrayBuffer());
  return {
    status: response.status,
    headers: response.headers,
    bytes,
    json: () => JSON.parse(bytes.toString()),
  };
}

/**
 * Send a request and leave at a point: `'headers'` once the status line is in, `'chunk'` once the first body
 * chunk is in, or after `afterMs`. Resolves when the client has gone.
 */
export async function leave(
  url: string,
  path: string,
  init: CallInit & { at: 'headers' | 'chunk' | number | Promise<unknown> },
): Promise<void> {
  const controller = new AbortController();
  const { at } = init;
  if (typeof at === 'number') setTimeout(() => controller.abort(), at);
  // A moment the server reports (the handler started): the client leaves then, however slow the machine is.
  else if (at instanceof Promise) void at.then(() => controller.abort());
  try {
    const response = await request(url, path, { ...init, signal: controller.signal });
    if (at === 'chunk') await response.body?.getReader().read();
    controller.abort();
    await response.arrayBuffer().catch(() => {});
  } catch {
    // aborted: what this is for
  }
}

/** Wait until the record of `key` (scope '') is no longer in flight; return it (undefined when released). */
export async function settled(
  store: IdempotencyStore,
  key: string,
  scope = '',
): Promise<IdempotencyRecord | undefined> {
  for (let waitedMs = 0; ; waitedMs += 10) {
    const record = await store.load({ scope, key });
    if (record === undefined || record.response !== null) return record;
    assert.ok(waitedMs < 3_000, `the key ${key} is still in flight after 3 s`);
    await sleep(10);
  }
}

export interface ServerContext {
  url: string;
  business: Business;
  /** The store under the adapter (before any wrapper). */
  store: IdempotencyStore;
}

export type ServerOptions = Partial<ServerConfig['options']> & {
  wrapStore?: (store: IdempotencyStore) => IdempotencyStore;
};

/**
 * A `withServer(options, body)` for one store: starts a server with the adapter over a fresh store, runs the
 * body, and fails on any unhandled rejection or uncaught exception meanwhile.
 */
export function serverRunner(makeServer: MakeServer, makeStore: () => Promise<IdempotencyStore>) {
  return async function withServer(
    options: ServerOptions,
    body: (context: ServerContext) => Promise<void>,
  ): Promise<void> {
    const crashes: unknown[] = [];
    const onCrash = (error: unknown) => crashes.push(error);
    process.on('unhandledRejection', onCrash);
    process.on('uncaughtException', onCrash);
    const base = await makeStore();
    const { wrapStore, ...rest } = options;
    const business = createBusiness();
    const server = await makeServer({
      options: { store: wrapStore ? wrapStore(base) : base, heartbeatIntervalMs: false, ...rest },
      business,
    });
    try {
      await body({ url: server.url, business, store: base });
      await sleep(20); // let finish/release land before the next assertions and the crash check
      assert.deepEqual(crashes, [], 'no unhandled rejection or uncaught exception');
    } finally {
      await server.close();
      await base.close?.();
      process.off('unhandledRejection', onCrash);
      process.off('uncaughtException', onCrash);
    }
  };
}

/** What {@link postLeaving} got: the status, the replay headers and the body. */
export interface LeavingAnswer {
  status: number;
  replayed: string | undefined;
  omitted: string | undefined;
  body: string;
}

/**
 * A keyed `POST {base}/orders` of a 15-byte JSON body on a connection of its own, whose client leaves (destroys
 * the request) after `leaveAfterMs` if given: `undefined` when the connection closed without an answer.
 */
export function postLeaving(
  base: string,
  key: string,
  leaveAfterMs?: number,
): Promise<LeavingAnswer | undefined> {
  return new Promise((resolve) => {
    const req = httpRequest(
      `${base}/orders`,
      {
        method: 'POST',
        agent: false,
        headers: { 'content-type': 'application/json', 'idempotency-key': key, 'content-length': 15 },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('error', () => resolve(undefined));
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            replayed: res.headers['idempotent-replayed'] as string | undefined,
            omitted: res.headers['idempotent-replay-body-omitted'] as string | undefined,
            body: Buffer.concat(chunks).toString(),
          }),
        );
      },
    );
    req.on('error', () => resolve(undefined));
    req.end('{"item":"book"}');
    if (leaveAfterMs !== undefined)
      setTimeout(() => {
        req.destroy();
        resolve(undefined);
      }, leaveAfterMs);
  });
}
