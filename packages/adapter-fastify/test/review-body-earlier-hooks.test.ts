import { once } from 'node:events';
import type { Readable } from 'node:stream';
import { fastifyIdempotency } from '@idem/adapter-fastify';
import { createMemoryStore } from '@idem/store-memory';
import Fastify, { type FastifyInstance } from 'fastify';
import { v7 } from 'uuid';
import { afterEach, describe, expect, test } from 'vitest';
import { sendInParts } from './support/send-in-parts.js';

// Review of keepBody: an app's own preParsing hooks (addHook) always run before the plugin's (route-level)
// one. What they do to the stream before the plugin sees it must not break keyed requests, nor the
// fingerprint. The Transform of the build before piped from the source whatever state it was in.

let app: FastifyInstance | undefined;
afterEach(async () => {
  await app?.close();
  app = undefined;
});

const delay = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function server(hook: (payload: Readable) => Promise<Readable> | Readable, withPlugin = true) {
  let runs = 0;
  app = Fastify();
  // Callback style: a hook that returns at once hands the stream on in the same tick, as Fastify's own do.
  app.addHook('preParsing', (_request, _reply, payload, done) => {
    const result = hook(payload);
    if (result instanceof Promise) result.then((stream) => done(null, stream), done);
    else done(null, result);
  });
  if (!withPlugin) {
    app.post('/orders', async (request, reply) => reply.code(201).send({ got: request.body }));
    const url = await app.listen({ port: 0, host: '127.0.0.1' });
    return { port: Number(new URL(url).port), runs: () => runs };
  }
  await app.register(fastifyIdempotency, { store: createMemoryStore({ sweepIntervalMs: false }) });
  app.post('/orders', async (request, reply) => {
    runs++;
    return reply.code(201).send({ run: runs, got: request.body });
  });
  const url = await app.listen({ port: 0, host: '127.0.0.1' });
  return { port: Number(new URL(url).port), runs: () => runs };
}

/** A keyed JSON POST whose body goes out in parts, `gapMs` apart. */
const send = (port: number, key: string, parts: Buffer[], gapMs = 0) =>
  sendInParts(port, key, parts, { headers: { 'content-type': 'application/json' }, gapMs });

describe('an app preParsing hook that only looks at the stream', () => {
  const counting = (count: (n: number) => void) => (payload: Readable) => {
    payload.on('data', (chunk: Buffer) => count(chunk.length));
    return payload;
  };

  test('(control) the counting hook works without the plugin: Fastify parses the body whole', async () => {
    let received = 0;
    const { port } = await server(
      counting((n) => (received += n)),
      false,
    );
    const body = Buffer.from('{"item":"book"}');
    const answer = await send(port, v7(), [body]);
    expect(answer.status).toBe(201);
    expect(JSON.parse(answer.body)).toEqual({ got: { item: 'book' } });
    expect(received).toBe(body.length);
  });

  test('one that counts the bytes with a data listener (request-size metrics): keyed requests still execute and replay', async () => {
    let received = 0;
    const { port, runs } = await server(counting((n) => (received += n)));
    const key = v7();
    const body = Buffer.from('{"item":"book"}');
    const first = await send(port, key, [body]);
    expect(received).toBe(body.length);
    expect(first.status).toBe(201); // is 415 IDEMPOTENCY_BODY_UNSEEN: the stream was flowing, no byte was missed
    expect((await send(port, key, [body])).replayed).toBe('true');
    expect(runs()).toBe(1);
  });

  test('one that peeks at the first bytes and puts them back (read + unshift): keyed requests still execute', async () => {
    const { port, runs } = await server(async (payload) => {
      if (payload.readableLength === 0) await once(payload, 'readable');
      const head = payload.read(1) as Buffer | null; // sniffing a magic byte
      if (head !== null) payload.unshift(head);
      return payload;
    });
    const key = v7();
    const body = Buffer.from('{"item":"book"}');
    const first = await send(port, key, [body]);
    expect(first.status).toBe(201); // is 415: every byte is still in the stream, but it "was read from"
    expect(runs()).toBe(1);
  });
});

describe('an app preParsing hook that decodes the stream (setEncoding) and waits', () => {
  const decoding = async (payload: Readable) => {
    payload.setEncoding('utf8');
    await delay(30); // part of the body arrives meanwhile
    return payload;
  };

  test('a character split across the parts that arrived before and after: the same bytes sent at once replay', async () => {
    const { port, runs } = await server(decoding);
    const key = v7();
    const body = Buffer.from('{"name":"é"}');
    const cut = body.indexOf(0xc3) + 1; // between the two bytes of é
    const first = await send(port, key, [body.subarray(0, cut), body.subarray(cut)], 60);
    expect(first.status).toBe(201);
    expect(JSON.parse(first.body).got).toEqual({ name: 'é' });
    const retry = await send(port, key, [body]); // the very same bytes, in one part
    expect(retry.status).toBe(201);
    expect(retry.replayed).toBe('true'); // is 422: the first fingerprint hashed the body without the byte 0xc3
    expect(runs()).toBe(1);
  });

  test('two different bodies (é and ©) split alike must not replay each other', async () => {
    const { port, runs } = await server(decoding);
    const key = v7();
    const e = Buffer.from('{"name":"é"}'); // c3 a9
    const c = Buffer.from('{"name":"©"}'); // c2 a9
    const cut = e.indexOf(0xc3) + 1;
    const first = await send(port, key, [e.subarray(0, cut), e.subarray(cut)], 60);
    expect(JSON.parse(first.body).got).toEqual({ name: 'é' });
    const other = await send(port, key, [c.subarray(0, cut), c.subarray(cut)], 60);
    expect(other.replayed).toBeUndefined(); // is 'true': the answer for é replayed for ©
    expect(other.status).toBe(422);
    expect(runs()).toBe(1);
  });
});
