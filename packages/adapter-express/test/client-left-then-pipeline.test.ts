import { request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pipeline, Readable } from 'node:stream';
import { captureRawBody, idempotencyMiddleware } from '@idem/adapter-express';
import { postLeaving, settled } from '@idem/adapter-suite';
import { createMemoryStore } from '@idem/store-memory';
import compression from 'compression';
import express, { type RequestHandler, type Response } from 'express';
import express4 from 'express4';
import { v7 } from 'uuid';
import { afterEach, describe, expect, test } from 'vitest';

// The client leaves before any status is written; the handler answers afterwards. Its answer settles the key
// (design.md, "the client leaves before any status"): a stream piped into the response can no longer be
// written, so the key is settled with its status and no body; a destroy without any answer releases it.

const closers: (() => void)[] = [];
afterEach(() => {
  for (const close of closers.splice(0)) close();
});

const delay = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

type Factory = typeof express;

/** A source that waits `ms` before its one chunk. */
const slowSource = (ms: number) =>
  Readable.from(
    (async function* () {
      await delay(ms);
      yield '{"id":1}';
    })(),
  );

/**
 * An app whose first run of POST /orders does `first` (after `waitMs`: the client leaves meanwhile); later runs
 * answer 201 with JSON. `before`: a layer mounted before the middleware (compression wraps the response's own
 * methods, so the capture is on the response itself rather than on Express's prototype).
 */
async function start(
  factory: Factory,
  first: (res: Response, done: (error?: unknown) => void) => void,
  { waitMs = 100, before }: { waitMs?: number; before?: RequestHandler | undefined } = {},
) {
  const store = createMemoryStore({ sweepIntervalMs: false });
  let runs = 0;
  const outcomes: unknown[] = [];
  const app = factory();
  if (before !== undefined) app.use(before);
  app.use(express.json({ verify: captureRawBody }), idempotencyMiddleware({ store }));
  app.post('/orders', async (_req, res) => {
    runs++;
    if (runs > 1) return void res.status(201).json({ id: runs });
    await delay(waitMs);
    first(res, (error) => outcomes.push(error ?? 'done'));
  });
  const server = app.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  closers.push(() => server.close());
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { store, base, runs: () => runs, outcomes };
}

const viaPipeline =
  (source: () => Readable) =>
  (res: Response, done: (error?: unknown) => void): void => {
    res.status(201).type('application/json');
    pipeline(source(), res, (error) => done(error));
  };

describe.each([
  ['express 5', express, undefined],
  ['express 4', express4 as unknown as Factory, undefined],
  [
    'express 5, compression mounted first',
    express,
    compression({ threshold: 0 }) as unknown as RequestHandler,
  ],
] as const)('%s', (_name, factory, before: RequestHandler | undefined) => {
  describe('the client leaves before any status, then the handler answers through stream.pipeline(readable, res)', () => {
    for (const [name, answer] of [
      ['a source slow to start (nothing is written)', viaPipeline(() => slowSource(50))],
      ['a source with its bytes ready', viaPipeline(() => Readable.from(['{"id":', '1}']))],
      // pipeline writes these itself (no pipe() and no 'pipe' event): a write is all the response sees.
      ['a web ReadableStream', viaPipeline(() => ReadableStream.from(['{"id":1}']) as unknown as Readable)],
      [
        'a source through an async generator',
        (res: Response, done: (error?: unknown) => void) => {
          res.status(201).type('application/json');
          pipeline(
            slowSource(20),
            async function* (source: AsyncIterable<Buffer | string>) {
              for await (const chunk of source) yield String(chunk);
            },
            res,
            (error) => done(error),
          );
        },
      ],
    ] as const) {
      test(`${name}: settled at once with its status and no body; the retry replays that, the handler ran once`, async () => {
        const { store, base, runs, outcomes } = await start(factory, answer, { before });
        const key = v7();
        await postLeaving(base, key, 30);
        await delay(200);
        expect(outcomes).toHaveLength(1); // the pipeline ended (with the premature close of the response)
        const record = await store.load({ scope: '', key });
        expect(record?.response).toMatchObject({ status: 201, body: null, bodyOmitted: true });
        const retry = await postLeaving(base, key);
        expect(retry).toMatchObject({ status: 201, replayed: 'true', omitted: 'true', body: '' });
        expect(runs()).toBe(1);
      });
    }
  });

  test('the client leaves after the pipeline began, before its first byte: settled at once', async () => {
    const { store, base, runs } = await start(
      factory,
      viaPipeline(() => slowSource(300)),
      {
        waitMs: 0,
        before,
      },
    );
    const key = v7();
    await postLeaving(base, key, 80);
    await delay(50);
    const record = await store.load({ scope: '', key });
    expect(record?.response).toMatchObject({ status: 201, body: null, bodyOmitted: true });
    await delay(300);
    const retry = await postLeaving(base, key);
    expect(retry).toMatchObject({ status: 201, replayed: 'true', omitted: 'true' });
    expect(runs()).toBe(1);
  });

  test('the client leaves, then the handler destroys the response without any answer: released at once', async () => {
    const { store, base, runs } = await start(factory, (res) => res.destroy(), { before });
    const key = v7();
    await postLeaving(base, key, 30);
    await delay(150);
    expect(await store.load({ scope: '', key })).toBeUndefined();
    const retry = await postLeaving(base, key);
    expect(retry).toMatchObject({ status: 201, replayed: undefined, body: '{"id":2}' });
    expect(runs()).toBe(2);
  });

  test('the client leaves, then the handler writes its answer and ends it at once: stored whole', async () => {
    const { store, base, runs } = await start(
      factory,
      (res) => {
        res.status(201).type('application/json');
        res.write('{"id":');
        res.end('1}');
      },
      { before },
    );
    const key = v7();
    await postLeaving(base, key, 30);
    await delay(150);
    await settled(store, key);
    const retry = await postLeaving(base, key);
    expect(retry).toMatchObject({ status: 201, replayed: 'true', body: '{"id":1}' });
    expect(runs()).toBe(1);
  });

  test('the client leaves, then the handler answers with res.json: stored whole', async () => {
    const { store, base, runs } = await start(factory, (res) => void res.status(201).json({ id: 1 }), {
      before,
    });
    const key = v7();
    await postLeaving(base, key, 30);
    await delay(150);
    await settled(store, key);
    const retry = await postLeaving(base, key);
    expect(retry).toMatchObject({ status: 201, replayed: 'true', body: '{"id":1}' });
    expect(runs()).toBe(1);
  });

  test('the client stays and the pipeline’s source fails before any byte: released (the server broke it off)', async () => {
    const failing = () =>
      new Readable({
        read() {
          this.destroy(new Error('upstream failed'));
        },
      });
    const { store, base, runs } = await start(factory, viaPipeline(failing), { waitMs: 0, before });
    const key = v7();
    expect(await postLeaving(base, key)).toBeUndefined();
    await delay(50);
    expect(await store.load({ scope: '', key })).toBeUndefined();
    expect((await postLeaving(base, key))?.status).toBe(201);
    expect(runs()).toBe(2);
  });

  test('HEAD when covered: the client leaves, then the handler pipes its answer: no body is missing from it (not marked omitted)', async () => {
    const store = createMemoryStore({ sweepIntervalMs: false });
    let runs = 0;
    const app = factory();
    if (before !== undefined) app.use(before);
    app.use(idempotencyMiddleware({ store, methods: ['HEAD', 'POST'] }));
    app.head('/orders', async (_req, res) => {
      runs++;
      await delay(100);
      res.status(200).type('text/plain');
      pipeline(slowSource(20), res, () => {});
    });
    const server = app.listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    closers.push(() => server.close());
    const { port } = server.address() as AddressInfo;
    const head = (leaveAfterMs?: number) =>
      new Promise<Record<string, unknown> | undefined>((resolve) => {
        const req = httpRequest(
          {
            host: '127.0.0.1',
            port,
            path: '/orders',
            method: 'HEAD',
            agent: false,
            headers: { 'idempotency-key': key },
          },
          (res) => {
            res.resume();
            res.on('end', () => resolve({ status: res.statusCode, ...res.headers }));
          },
        );
        req.on('error', () => resolve(undefined));
        req.end();
        if (leaveAfterMs !== undefined)
          setTimeout(() => {
            req.destroy();
            resolve(undefined);
          }, leaveAfterMs);
      });
    const key = v7();
    await head(30);
    await delay(200);
    const stored = (await store.load({ scope: '', key }))?.response;
    expect(stored).toMatchObject({ status: 200, headers: { 'content-type': 'text/plain; charset=utf-8' } });
    expect(stored?.body?.length ?? 0).toBe(0);
    expect(stored?.bodyOmitted).toBeUndefined();
    const retry = await head();
    expect(retry).toMatchObject({ status: 200, 'idempotent-replayed': 'true' });
    expect(retry?.['idempotent-replay-body-omitted']).toBeUndefined();
    expect(runs).toBe(1);
  });
});
