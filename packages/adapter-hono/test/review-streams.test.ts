import { type IdempotencyEnv, idempotency } from '@idem/adapter-hono';
import type { IdempotencyStore } from '@idem/core';
import { createMemoryStore } from '@idem/store-memory';
import { Hono } from 'hono';
import { stream, streamSSE, streamText } from 'hono/streaming';
import { v7 } from 'uuid';
import { afterEach, describe, expect, test } from 'vitest';
import { listen } from './app.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  while (closers.length > 0) await closers.pop()?.();
});

async function serveApp(app: Hono<IdempotencyEnv>): Promise<string> {
  const server = await listen(app.fetch);
  closers.push(server.close);
  return server.url;
}

const keyed = (key: string, body = '{"a":1}', type = 'application/json') => ({
  method: 'POST',
  headers: { 'content-type': type, 'idempotency-key': key },
  body,
});

/** The record's state: undefined (released), 'in-flight' or 'completed'. */
async function stateOf(store: IdempotencyStore, key: string): Promise<string | undefined> {
  const record = await store.load({ scope: '', key });
  if (record === undefined) return undefined;
  return record.response === null ? 'in-flight' : 'completed';
}

describe('review: streamed answers on a real @hono/node-server', () => {
  test('SSE that never ends, client leaves after the first event: the stream is aborted and the key is not stuck in flight', async () => {
    const store = createMemoryStore({ sweepIntervalMs: false });
    const app = new Hono<IdempotencyEnv>();
    // Short lease: if nothing renewed it, it would lapse by the time we look.
    app.use(idempotency({ store, leaseMs: 150, heartbeatIntervalMs: 50 }));
    let aborted = false;
    let writes = 0;
    app.post('/events', (c) =>
      streamSSE(c, async (s) => {
        s.onAbort(() => {
          aborted = true;
        });
        while (!aborted && writes < 200) {
          await s.writeSSE({ data: `tick ${writes++}` });
          await s.sleep(10);
        }
      }),
    );
    const url = await serveApp(app);
    const key = v7();
    const controller = new AbortController();
    const res = await fetch(`${url}/events`, { ...keyed(key), signal: controller.signal });
    expect(res.status).toBe(200);
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    await reader.read();
    controller.abort();
    await sleep(400);
    const state = await stateOf(store, key);
    const writesAtCheck = writes;
    await sleep(100);
    // Without the middleware node-server cancels the body when the client leaves, and streamSSE's onAbort fires.
    expect({ aborted, state, stillWriting: writes > writesAtCheck }).toEqual({
      aborted: true,
      state: expect.not.stringMatching(/in-flight/) as unknown as string,
      stillWriting: false,
    });
  });

  test('control: the same SSE route without the middleware sees onAbort when the client leaves', async () => {
    const app = new Hono<IdempotencyEnv>();
    let aborted = false;
    app.post('/events', (c) =>
      streamSSE(c, async (s) => {
        s.onAbort(() => {
          aborted = true;
        });
        let n = 0;
        while (!aborted && n < 200) {
          await s.writeSSE({ data: `tick ${n++}` });
          await s.sleep(10);
        }
      }),
    );
    const url = await serveApp(app);
    const controller = new AbortController();
    const res = await fetch(`${url}/events`, { ...keyed(v7()), signal: controller.signal });
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    await reader.read();
    controller.abort();
    await sleep(300);
    expect(aborted).toBe(true);
  });

  test('a ReadableStream body whose client leaves: the source is cancelled (its cancel runs)', async () => {
    const store = createMemoryStore({ sweepIntervalMs: false });
    const app = new Hono<IdempotencyEnv>();
    app.use(idempotency({ store }));
    let cancelled = false;
    let pulls = 0;
    app.post('/feed', () => {
      const body = new ReadableStream<Uint8Array>({
        async pull(controller) {
          pulls++;
          await sleep(10);
          controller.enqueue(new TextEncoder().encode(`chunk ${pulls}\n`));
        },
        cancel() {
          cancelled = true;
        },
      });
      return new Response(body, { headers: { 'content-type': 'text/plain' } });
    });
    const url = await serveApp(app);
    const key = v7();
    const controller = new AbortController();
    const res = await fetch(`${url}/feed`, { ...keyed(key), signal: controller.signal });
    await (res.body as ReadableStream<Uint8Array>).getReader().read();
    controller.abort();
    await sleep(300);
    const pullsThen = pulls;
    await sleep(200);
    expect({ cancelled, stillPulling: pulls > pullsThen, state: await stateOf(store, key) }).toEqual({
      cancelled: true,
      stillPulling: false,
      state: expect.not.stringMatching(/in-flight/) as unknown as string,
    });
  });
});

describe('review: body kinds through Hono on @hono/node-server (first answer == replay)', () => {
  const bodyKinds: Record<string, (c: import('hono').Context) => Response | Promise<Response>> = {
    'c.json': (c) => c.json({ ok: true, n: 1 }, 201),
    'c.text': (c) => c.text('plain text é', 200),
    'c.html': (c) => c.html('<p>hi</p>'),
    'c.body Uint8Array': (c) =>
      c.body(new Uint8Array([0, 1, 2, 255]), 200, { 'content-type': 'application/octet-stream' }),
    'c.body ArrayBuffer': (c) => c.body(new Uint8Array([9, 8, 7]).buffer, 200),
    'c.newResponse': (c) => c.newResponse('new', 202, { 'content-type': 'text/x-new' }),
    'c.redirect': (c) => c.redirect('/elsewhere', 303),
    'Response.redirect': () => Response.redirect('http://example.com/x', 301),
    'Response.json': () => Response.json({ x: [1, 2] }, { status: 201 }),
    DataView: () => new Response(new DataView(new Uint8Array([1, 2, 3, 4]).buffer, 1, 2)),
    Uint16Array: () => new Response(new Uint16Array([0x4142, 0x4344])),
    Blob: () => new Response(new Blob(['blob body'], { type: 'image/x-test' })),
    FormData: () => {
      const form = new FormData();
      form.append('a', '1');
      form.append('f', new Blob(['file']), 'f.txt');
      return new Response(form);
    },
    URLSearchParams: () => new Response(new URLSearchParams({ a: '1', b: 'two words' })),
    'ReadableStream of bytes': () =>
      new Response(ReadableStream.from([new Uint8Array([104, 105]), new Uint8Array([33])]), {
        headers: { 'content-type': 'text/plain' },
      }),
    'ReadableStream of strings': () =>
      new Response(ReadableStream.from(['str', 'ing', ' é']) as unknown as ReadableStream<Uint8Array>, {
        headers: { 'content-type': 'text/plain' },
      }),
    '204 null body': (c) => c.body(null, 204),
    '304 null body': () => new Response(null, { status: 304, headers: { etag: '"x"' } }),
    'stream()': (c) =>
      stream(c, async (s) => {
        await s.write(new Uint8Array([1, 2]));
        await s.write('three');
      }),
    'streamText()': (c) =>
      streamText(c, async (s) => {
        await s.writeln('line 1');
        await s.sleep(5);
        await s.write('line 2');
      }),
    'streamSSE() finite': (c) =>
      streamSSE(c, async (s) => {
        await s.writeSSE({ data: 'one', event: 'e', id: '1' });
        await s.writeSSE({ data: 'two' });
      }),
  };

  for (const [name, handler] of Object.entries(bodyKinds)) {
    test(`${name}: status, content-type, location and bytes replay as first sent; nothing left in flight`, async () => {
      const store = createMemoryStore({ sweepIntervalMs: false });
      const app = new Hono<IdempotencyEnv>();
      let runs = 0;
      app.use(idempotency({ store }));
      app.post('/kind', (c) => {
        runs++;
        return handler(c);
      });
      const url = await serveApp(app);
      const key = v7();
      const first = await fetch(`${url}/kind`, { ...keyed(key), redirect: 'manual' });
      const firstBytes = new Uint8Array(await first.arrayBuffer());
      await sleep(30);
      expect(await stateOf(store, key)).toBe('completed');
      const again = await fetch(`${url}/kind`, { ...keyed(key), redirect: 'manual' });
      const againBytes = new Uint8Array(await again.arrayBuffer());
      expect(again.headers.get('idempotent-replayed')).toBe('true');
      expect(again.headers.get('idempotent-replay-body-omitted')).toBeNull();
      expect({
        status: again.status,
        type: again.headers.get('content-type'),
        location: again.headers.get('location'),
        body: Buffer.from(againBytes).toString('hex'),
      }).toEqual({
        status: first.status,
        type: first.headers.get('content-type'),
        location: first.headers.get('location'),
        body: Buffer.from(firstBytes).toString('hex'),
      });
      expect(runs).toBe(1);
    });
  }

  test('a Buffer body the app changes after answering: the replay is the bytes first sent', async () => {
    const store = createMemoryStore({ sweepIntervalMs: false });
    const app = new Hono<IdempotencyEnv>();
    app.use(idempotency({ store }));
    // One buffer the app reuses between answers (a pooled or pre-rendered body).
    const shared = Buffer.from('first answer');
    app.post('/pooled', (c) => {
      const response = c.body(shared, 200, { 'content-type': 'text/plain' });
      setTimeout(() => shared.write('CHANGED!!!!!'), 20);
      return response;
    });
    const url = await serveApp(app);
    const key = v7();
    const first = await (await fetch(`${url}/pooled`, keyed(key))).text();
    expect(first).toBe('first answer');
    await sleep(60);
    const again = await (await fetch(`${url}/pooled`, keyed(key))).text();
    expect(again).toBe(first);
  });

  test('c.res replaced by an inner middleware after the handler: the stored answer is what the client got', async () => {
    const store = createMemoryStore({ sweepIntervalMs: false });
    const app = new Hono<IdempotencyEnv>();
    app.use(idempotency({ store }));
    app.use(async (c, next) => {
      await next();
      c.res = new Response(`wrapped:${await c.res.text()}`, {
        status: 201,
        headers: { 'content-type': 'text/x-wrapped' },
      });
    });
    app.post('/wrap', (c) => c.text('inner'));
    const url = await serveApp(app);
    const key = v7();
    const first = await fetch(`${url}/wrap`, keyed(key));
    const firstText = await first.text();
    const again = await fetch(`${url}/wrap`, keyed(key));
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect([again.status, again.headers.get('content-type'), await again.text()]).toEqual([
      first.status,
      first.headers.get('content-type'),
      firstText,
    ]);
  });

  test('a body stream that fails after its first chunk: stored with its status and no body', async () => {
    const store = createMemoryStore({ sweepIntervalMs: false });
    const app = new Hono<IdempotencyEnv>();
    app.use(idempotency({ store }));
    app.post('/half', () => {
      let sent = false;
      return new Response(
        new ReadableStream({
          async pull(controller) {
            if (!sent) {
              sent = true;
              controller.enqueue(new TextEncoder().encode('part'));
              return;
            }
            await sleep(10);
            controller.error(new Error('broke'));
          },
        }),
        { status: 201 },
      );
    });
    const url = await serveApp(app);
    const key = v7();
    await fetch(`${url}/half`, keyed(key))
      .then((r) => r.text())
      .catch(() => undefined);
    await sleep(50);
    const again = await fetch(`${url}/half`, keyed(key));
    expect(again.status).toBe(201);
    expect(again.headers.get('idempotent-replay-body-omitted')).toBe('true');
  });
});
