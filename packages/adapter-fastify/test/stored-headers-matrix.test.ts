import { Readable } from 'node:stream';
import { gzipSync } from 'node:zlib';
import { fastifyIdempotency } from '@idem/adapter-fastify';
import { DEFAULT_REPLAY_HEADERS, NEVER_STORED_HEADERS } from '@idem/core';
import { createMemoryStore } from '@idem/store-memory';
import Fastify, { type FastifyInstance, type FastifyReply } from 'fastify';
import { v7 } from 'uuid';
import { afterEach, expect, test } from 'vitest';

// The stored headers are read by name (`execution.storedHeaders`, `reply.getHeader`). Each case compares them
// with what copying every header (`reply.getHeaders()`, own names only) and filtering it by the allow-list gives
// for the same reply once the answer went out: the two ways must store the same, whichever way and in whatever
// case a header was set, shadowed or removed.

let app: FastifyInstance | undefined;
afterEach(async () => {
  await app?.close();
  app = undefined;
});

type Handler = (reply: FastifyReply) => unknown;

function oldStored(reply: FastifyReply, allow: readonly string[]) {
  const set = new Set(allow.map((h) => h.toLowerCase()));
  const all = reply.getHeaders() as Record<string, unknown>;
  const out: Record<string, string> = {};
  for (const name in all) {
    if (!Object.hasOwn(all, name)) continue;
    const value = all[name];
    const lower = name.toLowerCase();
    if (
      value === undefined ||
      !set.has(lower) ||
      NEVER_STORED_HEADERS.has(lower) ||
      lower === 'content-encoding'
    )
      continue;
    out[lower] = Array.isArray(value) ? value.join(', ') : String(value);
  }
  return { headers: out, encoding: all['content-encoding'] };
}

async function run(
  handler: Handler,
  {
    replayHeaders,
    route,
    setup,
  }: { replayHeaders?: string[]; route?: object; setup?: (app: FastifyInstance) => void } = {},
) {
  const store = createMemoryStore({ sweepIntervalMs: false });
  app = Fastify();
  await app.register(fastifyIdempotency, { store, ...(replayHeaders ? { replayHeaders } : {}) });
  setup?.(app);
  let runs = 0;
  let last: FastifyReply | undefined;
  app.post('/r', route ? { config: { idempotency: route } } : {}, async (_request, reply) => {
    runs++;
    last = reply;
    return handler(reply);
  });
  const url = await app.listen({ port: 0, host: '127.0.0.1' });
  const key = v7();
  const send = () =>
    fetch(`${url}/r`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': key, 'accept-encoding': 'identity' },
      body: '{}',
    });
  const first = await send();
  const firstBody = Buffer.from(await first.arrayBuffer());
  await new Promise((r) => setTimeout(r, 20));
  const record = await store.load({ scope: '', key });
  const replay = await send();
  const replayBody = Buffer.from(await replay.arrayBuffer());
  return { first, firstBody, record, replay, replayBody, runs, reply: last as FastifyReply };
}

const allowed = (list?: string[]) => list ?? [...DEFAULT_REPLAY_HEADERS];

const cases: [string, Handler, { replayHeaders?: string[]; route?: object }?][] = [
  [
    'reply.header / reply.headers / raw.setHeader, mixed case, arrays, numbers',
    (reply) => {
      reply.raw.setHeader('X-Raw', ['a', 'b']);
      reply.raw.setHeader('X-Num-Raw', 7);
      reply.headers({ 'X-Many': 'm', 'x-ARR': ['1', '2'] });
      return reply.code(201).header('X-Order-Total', 12).header('Location', '/x').send({ ok: true });
    },
    { replayHeaders: ['content-type', 'location', 'x-order-total', 'X-RAW', 'x-num-raw', 'X-Many', 'x-arr'] },
  ],
  [
    'set then removed (reply and raw)',
    (reply) => {
      reply.header('x-gone', '1');
      reply.removeHeader('x-gone');
      reply.raw.setHeader('x-gone-raw', '1');
      reply.removeHeader('X-Gone-Raw');
      reply.raw.setHeader('x-both', 'raw');
      reply.header('x-both', 'reply');
      return reply.send('ok');
    },
    { replayHeaders: ['x-gone', 'x-gone-raw', 'x-both', 'content-type'] },
  ],
  [
    'replay header shadowed: raw set, reply set to empty string / 0',
    (reply) => {
      reply.raw.setHeader('x-e', 'raw');
      reply.header('x-e', '');
      reply.raw.setHeader('x-z', 'raw');
      reply.header('x-z', 0 as unknown as string);
      return reply.send('ok');
    },
    { replayHeaders: ['x-e', 'x-z'] },
  ],
  [
    'default allow-list',
    (reply) => reply.code(201).header('location', '/a').header('x-no', '1').send({ a: 1 }),
  ],
  [
    'empty replayHeaders',
    (reply) => reply.code(201).header('location', '/a').send({ a: 1 }),
    { replayHeaders: [] },
  ],
  [
    'upper-case replayHeaders',
    (reply) => reply.code(201).header('location', '/a').header('x-up', 'u').send({ a: 1 }),
    { replayHeaders: ['LOCATION', 'X-Up', 'Content-Type'] },
  ],
  [
    'per-route override list',
    (reply) => reply.code(201).header('location', '/a').header('x-route', 'r').send({ a: 1 }),
    { replayHeaders: ['location'], route: { replayHeaders: ['x-route'] } },
  ],
  [
    '204',
    (reply) => reply.code(204).header('x-204', 'y').send(),
    { replayHeaders: ['x-204', 'content-type'] },
  ],
  [
    // Fastify's reply keeps its headers in a plain object: `getHeader('constructor')` reads its prototype there.
    'a header named like an Object.prototype member, set on the response',
    (reply) => {
      reply.raw.setHeader('constructor', 'c');
      return reply.code(201).send({ a: 1 });
    },
    { replayHeaders: ['content-type', 'constructor'] },
  ],
  [
    'allow-list with Object.prototype names',
    (reply) => reply.code(201).send({ a: 1 }),
    { replayHeaders: ['content-type', 'constructor', 'tostring', 'valueOf', 'hasOwnProperty'] },
  ],
];

for (const [name, handler, opts] of cases) {
  test(`differential: ${name}`, async () => {
    const list = opts?.route
      ? (opts.route as { replayHeaders: string[] }).replayHeaders
      : allowed(opts?.replayHeaders);
    const r = await run(handler, opts);
    expect(r.runs).toBe(1);
    const oracle = oldStored(r.reply, list);
    expect(r.record?.response?.headers).toEqual(oracle.headers);
    expect(r.replay.headers.get('idempotent-replayed')).toBe('true');
    for (const [h, v] of Object.entries(oracle.headers)) expect(r.replay.headers.get(h)).toBe(v);
    expect(r.replayBody.equals(r.firstBody)).toBe(true);
    expect(r.replay.status).toBe(r.first.status);
  });
}

test('later onSend hook (registered after the plugin) sets a header and gzips', async () => {
  const list = ['content-type', 'x-late'];
  const r = await run((reply) => reply.code(201).send({ big: 'x'.repeat(200) }), {
    replayHeaders: list,
    setup: (a) =>
      a.addHook('onSend', async (_req, reply, payload) => {
        if (reply.getHeader('idempotent-replayed') !== undefined) return payload;
        reply.header('x-late', 'L');
        reply.header('Content-Encoding', 'gzip');
        return gzipSync(Buffer.from(payload as string));
      }),
  });
  const oracle = oldStored(r.reply, list);
  expect(r.record?.response?.headers).toEqual({ ...oracle.headers, 'content-encoding': 'gzip' });
  expect(oracle.encoding).toBe('gzip');
  expect(r.replay.headers.get('content-encoding')).toBe('gzip');
  expect(r.replay.headers.get('x-late')).toBe('L');
  expect(JSON.parse(r.replayBody.toString())).toEqual({ big: 'x'.repeat(200) }); // fetch decodes it
});

test('gzip with content-encoding set on raw, empty replayHeaders', async () => {
  const r = await run(
    (reply) => {
      reply.raw.setHeader('content-encoding', 'gzip');
      return reply.type('text/plain').send(gzipSync(Buffer.from('hello')));
    },
    { replayHeaders: [] },
  );
  expect(r.record?.response?.headers).toEqual({ 'content-encoding': 'gzip' });
  expect(r.replay.headers.get('content-encoding')).toBe('gzip');
  expect(r.replayBody.toString()).toBe('hello'); // fetch decodes it
});

test('hijacked reply', async () => {
  const r = await run(
    (reply) => {
      reply.hijack();
      reply.raw.writeHead(201, { 'X-Hj': 'h', 'content-type': 'text/plain' });
      reply.raw.end('hijacked');
    },
    { replayHeaders: ['x-hj', 'content-type'] },
  );
  expect(r.record?.response?.headers).toEqual({ 'x-hj': 'h', 'content-type': 'text/plain' });
  expect(r.replay.status).toBe(201);
  expect(r.replayBody.toString()).toBe('hijacked');
});

test('stream payload', async () => {
  const r = await run(
    (reply) =>
      reply
        .code(201)
        .header('x-s', 's')
        .type('text/plain')
        .send(Readable.from(['a', 'b'])),
    { replayHeaders: ['x-s', 'content-type'] },
  );
  expect(r.record?.response?.headers).toEqual({ 'x-s': 's', 'content-type': 'text/plain' });
  expect(r.replayBody.toString()).toBe('ab');
});

test('a route onSend hook added after the plugin (runs after the hand-over) sets a header', async () => {
  const list = ['content-type', 'x-after'];
  const r = await run((reply) => reply.code(201).send({ a: 1 }), {
    replayHeaders: list,
    setup: (a) =>
      a.addHook('onRoute', (route) => {
        route.onSend = [
          ...[route.onSend ?? []].flat(),
          async (_q: unknown, reply: FastifyReply, payload: unknown) => {
            reply.header('x-after', 'A');
            return payload;
          },
        ] as never;
      }),
  });
  const oracle = oldStored(r.reply, list);
  expect(r.record?.response?.headers).toEqual(oracle.headers);
  expect(r.replay.headers.get('x-after')).toBe('A');
});
