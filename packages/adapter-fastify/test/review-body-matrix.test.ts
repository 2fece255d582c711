import { connect } from 'node:net';
import { gzipSync } from 'node:zlib';
import { fastifyIdempotency } from '@idem/adapter-fastify';
import { createMemoryStore } from '@idem/store-memory';
import Fastify from 'fastify';
import { v7 } from 'uuid';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { gunzipBody } from './support/gunzip-body.js';
import { sendInParts } from './support/send-in-parts.js';

// Review of keepBody at Fastify's preParsing: bodies of every kind and timing, over a real socket.
// Every route answers 201 with a run counter; the same bytes must replay, other bytes must be refused (422),
// and a body nobody read must be refused (415), never fingerprinted from what happened to arrive.

const SCOPE = 's';
const store = createMemoryStore({ sweepIntervalMs: false });
const app = Fastify({ bodyLimit: 1024 * 1024 });
let runs = 0;
let port: number;

const delay = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

beforeAll(async () => {
  // Authentication, say: the body arrives in part or whole while this waits.
  app.addHook('onRequest', async (request) => {
    const ms = Number(request.headers['x-delay'] ?? 0);
    if (ms > 0) await delay(ms);
  });
  app.addHook('preParsing', gunzipBody); // decompression, app-wide: before the plugin's hook
  await app.register(fastifyIdempotency, { store, scope: () => SCOPE });
  app.addContentTypeParser('text/plain', { parseAs: 'string' }, (_r, body, done) => done(null, body));
  app.addContentTypeParser('application/x-bytes', { parseAs: 'buffer' }, (_r, body, done) =>
    done(null, body),
  );
  // Reads the stream itself, to the end.
  app.addContentTypeParser('application/x-iterated', async (_r: unknown, payload: AsyncIterable<unknown>) => {
    const chunks: Buffer[] = [];
    for await (const chunk of payload) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks);
  });
  // Hands the stream on unread.
  app.addContentTypeParser('application/x-upload', (_r, payload, done) => done(null, payload));
  // Reads only the first chunk, as a sniffing parser would.
  app.addContentTypeParser('application/x-first', (_r, payload, done) => {
    payload.once('data', (chunk: Buffer) => {
      payload.pause();
      done(null, chunk);
    });
  });
  app.post('/orders', async (request, reply) => {
    runs++;
    const body = request.body;
    const size =
      Buffer.isBuffer(body) || typeof body === 'string' ? body.length : JSON.stringify(body ?? null).length;
    return reply.code(201).send({ run: runs, size });
  });
  app.post('/small', { bodyLimit: 100 }, async (request, reply) => {
    runs++;
    return reply.code(201).send({ run: runs, got: request.body });
  });
  const url = await app.listen({ port: 0, host: '127.0.0.1' });
  port = Number(new URL(url).port);
});
afterAll(() => app.close());

/** A keyed POST whose body goes out in `parts`, `gapMs` apart (a fresh connection each). */
const send = (
  key: string,
  parts: (string | Buffer)[],
  headers: Record<string, string>,
  gapMs = 0,
  path = '/orders',
) => sendInParts(port, key, parts, { headers, gapMs, path });

const json = { 'content-type': 'application/json' };
const big = (fill: string) => JSON.stringify({ item: fill.repeat(100_000), n: 1 });

/** Timings: all at once; the body buffered before preParsing; half before and half after; many small parts. */
const timings: [string, (body: Buffer) => (string | Buffer)[], Record<string, string>, number][] = [
  ['sent whole, read at once', (b) => [b], {}, 0],
  ['buffered whole before preParsing (async onRequest)', (b) => [b], { 'x-delay': '20' }, 0],
  [
    'half buffered before preParsing, half after',
    (b) => [b.subarray(0, b.length >> 1), b.subarray(b.length >> 1)],
    { 'x-delay': '10' },
    40,
  ],
  [
    'many parts while preParsing runs',
    (b) => Array.from({ length: 8 }, (_, i) => b.subarray((i * b.length) >> 3, ((i + 1) * b.length) >> 3)),
    { 'x-delay': '15' },
    5,
  ],
];

describe('the same bytes replay, other bytes are refused, whatever the timing', () => {
  for (const [name, split, extra, gap] of timings) {
    for (const [kind, type, make] of [
      ['small JSON', json, (x: string) => Buffer.from(JSON.stringify({ item: x, n: 1 }))],
      ['large JSON (beyond the high-water mark)', json, (x: string) => Buffer.from(big(x))],
      ['text (parseAs string)', { 'content-type': 'text/plain' }, (x: string) => Buffer.from(`text ${x}`)],
      [
        'bytes with invalid UTF-8 (parseAs buffer)',
        { 'content-type': 'application/x-bytes' },
        (x: string) => Buffer.concat([Buffer.from([0xff, 0xfe, 0xc3]), Buffer.from(x), Buffer.from([0x80])]),
      ],
      [
        'read by the parser itself (for await)',
        { 'content-type': 'application/x-iterated' },
        (x: string) => Buffer.from(x.repeat(50_000)),
      ],
      [
        'gzip, decompressed by an app hook',
        { ...json, 'content-encoding': 'gzip' },
        (x: string) => gzipSync(big(x)),
      ],
    ] as const) {
      test(`${kind}, ${name}`, async () => {
        const key = v7();
        const before = runs;
        const headers = { ...type, ...extra };
        const first = await send(key, split(make('a')), headers, gap);
        expect(first.status).toBe(201);
        const same = await send(key, split(make('a')), headers, gap);
        expect(same).toEqual({ ...first, replayed: 'true' });
        const other = await send(key, split(make('b')), headers, gap);
        expect(other.status).toBe(422);
        expect(runs - before).toBe(1);
      });
    }
  }

  test('invalid UTF-8 bodies that differ only in their invalid bytes are different bodies (JSON type)', async () => {
    const key = v7();
    const one = Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0x22, 0x7d]); // {"a":"<ff>"}
    const two = Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xfe, 0x22, 0x7d]); // {"a":"<fe>"}
    const headers = { 'content-type': 'application/x-bytes', 'x-delay': '10' };
    expect((await send(key, [one], headers)).status).toBe(201);
    expect((await send(key, [two], headers)).status).toBe(422);
  });

  test('chunked transfer encoding, in parts, body buffered in part before preParsing', async () => {
    const key = v7();
    const before = runs;
    const headers = { ...json, 'transfer-encoding': 'chunked', 'x-delay': '10' };
    const body = Buffer.from(big('c'));
    const parts = [body.subarray(0, 1000), body.subarray(1000, 70_000), body.subarray(70_000)];
    expect((await send(key, parts, headers, 20)).status).toBe(201);
    expect((await send(key, [body], headers)).replayed).toBe('true');
    const other = Buffer.from(big('d'));
    expect((await send(key, [other.subarray(0, 5), other.subarray(5)], headers, 20)).status).toBe(422);
    expect(runs - before).toBe(1);
  });

  test('an empty body with Content-Length 0 replays', async () => {
    const key = v7();
    const headers = { 'content-type': 'text/plain' };
    const first = await send(key, [], headers);
    expect(first.status).toBe(201);
    expect((await send(key, [], headers)).replayed).toBe('true');
  });
});

describe('a body the parser did not read whole is never fingerprinted', () => {
  for (const [name, extra] of [
    ['read at once', {}],
    ['buffered before preParsing', { 'x-delay': '20' }],
  ] as const) {
    test(`a parser that hands the stream on: 415 IDEMPOTENCY_BODY_UNSEEN, nothing reserved (${name})`, async () => {
      const key = v7();
      const before = runs;
      const answer = await send(key, ['some upload bytes'], {
        'content-type': 'application/x-upload',
        ...extra,
      });
      expect(answer.status).toBe(415);
      expect(answer.body).toContain('IDEMPOTENCY_BODY_UNSEEN');
      expect(runs).toBe(before);
      expect(await store.load({ scope: SCOPE, key })).toBeUndefined();
    });
  }

  test('a parser that reads only the first chunk of a longer body: 415, never a fingerprint of the part', async () => {
    const key = v7();
    const before = runs;
    const body = Buffer.from('x'.repeat(200_000));
    const parts = [body.subarray(0, 10), body.subarray(10)];
    const answer = await send(key, parts, { 'content-type': 'application/x-first' }, 40).catch(
      (error: Error) => ({ status: -1, body: error.message, replayed: undefined }),
    );
    expect(answer.status).toBe(415);
    expect(runs).toBe(before);
  });
});

describe('a body that failed leaves the key free', () => {
  test('bodyLimit exceeded (413) while streaming: nothing reserved; the retry executes once and replays', async () => {
    const key = v7();
    const before = runs;
    const tooLarge = JSON.stringify({ item: 'x'.repeat(500) });
    const refused = await send(
      key,
      [tooLarge.slice(0, 50), tooLarge.slice(50)],
      { ...json, 'transfer-encoding': 'chunked' },
      20,
      '/small',
    );
    expect(refused.status).toBe(413);
    expect(await store.load({ scope: SCOPE, key })).toBeUndefined();
    const ok = await send(key, ['{"item":"ok"}'], json, 0, '/small');
    expect(ok.status).toBe(201);
    expect((await send(key, ['{"item":"ok"}'], json, 0, '/small')).replayed).toBe('true');
    expect(runs - before).toBe(1);
  });

  test('the client aborts mid-body while the body was partly buffered: nothing reserved; the retry executes once', async () => {
    const key = v7();
    const before = runs;
    await new Promise<void>((resolve, reject) => {
      const socket = connect(port, '127.0.0.1', () => {
        socket.write(
          'POST /orders HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\nx-delay: 10\r\n' +
            `content-length: 1000\r\nidempotency-key: ${key}\r\n\r\n{"item":`,
          () => setTimeout(() => socket.destroy(), 50),
        );
      });
      socket.on('close', () => resolve());
      socket.on('error', reject);
    });
    await delay(30);
    expect(await store.load({ scope: SCOPE, key })).toBeUndefined();
    expect((await send(key, ['{"item":"book"}'], json)).status).toBe(201);
    expect((await send(key, ['{"item":"book"}'], json)).replayed).toBe('true');
    expect(runs - before).toBe(1);
  });
});
