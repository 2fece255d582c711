import { fastifyIdempotency } from '@idem/adapter-fastify';
import { spiedStore } from '@idem/adapter-suite';
import Fastify, { type FastifyInstance } from 'fastify';
import { v7 } from 'uuid';
import { afterEach, describe, expect, test } from 'vitest';

// Review of the onSend hand-over: the execution is finished with the payload BEFORE Fastify writes it.
// Whatever happens between onSend and the wire is no longer what decides the stored answer.

let app: FastifyInstance | undefined;
afterEach(async () => {
  await app?.close();
  app = undefined;
});

/** A memory store whose finalized responses are also kept here, as the store got them. */

const settle = () => new Promise((resolve) => setTimeout(resolve, 30));

const post = async (url: string, key: string, path = '/orders') => {
  const response = await fetch(`${url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': key },
    body: '{"item":"book"}',
  });
  return {
    status: response.status,
    body: await response.text(),
    replayed: response.headers.get('idempotent-replayed'),
    contentType: response.headers.get('content-type'),
  };
};

describe('the stored answer is the one that went out', () => {
  test('a head Node refuses to write (a header value outside Latin-1) goes out as a 500: the key must not be stored as a 201', async () => {
    const { store } = spiedStore();
    let runs = 0;
    app = Fastify();
    await app.register(fastifyIdempotency, { store });
    app.post('/orders', async (_request, reply) => {
      runs++;
      // A file name with a character beyond Latin-1: Node's writeHead throws ERR_INVALID_CHAR, Fastify answers 500.
      return reply.code(201).header('x-file-name', 'résumé ✓.pdf').send({ id: runs });
    });
    const url = await app.listen({ port: 0, host: '127.0.0.1' });
    const key = v7();
    const first = await post(url, key);
    expect(first.status).toBe(500); // what the client was told
    await settle();
    const retry = await post(url, key);
    // A 500 releases the key: the retry runs the handler again (and fails again). It must never be told that
    // the request succeeded with a 201 the first client never saw.
    expect(retry).not.toMatchObject({ status: 201, replayed: 'true' });
    expect(retry.status).toBe(500);
    expect(runs).toBe(2);
  });

  test('an onSend hook that hands Fastify a payload it cannot write (a plain Uint8Array) is a 500: not stored as a 200', async () => {
    const { store, finalized } = spiedStore();
    app = Fastify();
    await app.register(fastifyIdempotency, { store });
    app.addHook('onSend', async (_request, _reply, payload) =>
      typeof payload === 'string' ? new Uint8Array(Buffer.from(payload)) : payload,
    );
    app.post('/orders', async () => ({ ok: true }));
    const url = await app.listen({ port: 0, host: '127.0.0.1' });
    const key = v7();
    const first = await post(url, key);
    expect(first.status).toBe(500);
    await settle();
    expect(finalized.map((response) => response.status)).not.toContain(200);
  });

  test('an onSend hook a later plugin adds per route (onRoute, as @fastify/compress does) fails: the 500 that went out is not stored as a 201', async () => {
    const { store, finalized } = spiedStore();
    let runs = 0;
    app = Fastify();
    await app.register(fastifyIdempotency, { store });
    // Registered after the idempotency plugin: its route-level onSend comes after the plugin's.
    app.addHook('onRoute', (routeOptions) => {
      const hooks = [routeOptions.onSend ?? []].flat();
      routeOptions.onSend = [
        ...hooks,
        async (_request, _reply, payload) => {
          if (String(payload).length > 10) throw new Error('response too large for this route');
          return payload;
        },
      ];
    });
    app.post('/orders', async (_request, reply) => {
      runs++;
      return reply.code(201).send({ id: runs, padding: 'xxxxxxxxxx' });
    });
    const url = await app.listen({ port: 0, host: '127.0.0.1' });
    const key = v7();
    const first = await post(url, key);
    expect(first.status).toBe(500);
    await settle();
    expect(finalized.map((response) => response.status)).not.toContain(201);
    const retry = await post(url, key);
    expect(retry).not.toMatchObject({ status: 201, replayed: 'true' });
  });

  test('reply.code(204) then a Response object: what is stored is what Fastify sends (the Response status and body)', async () => {
    const { store, finalized } = spiedStore();
    let runs = 0;
    app = Fastify();
    await app.register(fastifyIdempotency, { store });
    app.post('/orders', async (_request, reply) => {
      runs++;
      reply.code(204); // a default set early, then the handler answers with a Response of its own
      return reply.send(new Response('created', { status: 201, headers: { 'content-type': 'text/plain' } }));
    });
    const url = await app.listen({ port: 0, host: '127.0.0.1' });
    const key = v7();
    const first = await post(url, key);
    expect(first).toMatchObject({ status: 201, body: 'created' });
    await settle();
    expect(finalized[0]?.status).toBe(201);
    const retry = await post(url, key);
    expect(retry).toMatchObject({ status: 201, body: 'created', replayed: 'true' });
    expect(runs).toBe(1);
  });

  test('a 204 sent with a body: Fastify strips Content-Type from the wire, the replay must not add it back', async () => {
    const { store } = spiedStore();
    app = Fastify();
    await app.register(fastifyIdempotency, { store });
    app.post('/orders', async (_request, reply) => reply.code(204).send({ ignored: true }));
    const url = await app.listen({ port: 0, host: '127.0.0.1' });
    const key = v7();
    const first = await post(url, key);
    expect(first).toMatchObject({ status: 204, body: '' });
    await settle();
    const retry = await post(url, key);
    expect(retry).toMatchObject({ status: 204, body: '', replayed: 'true' });
    expect(retry.contentType).toBe(first.contentType);
  });
});

describe('the stored body is a copy, not the app’s buffer', () => {
  test('a buffer the app reuses after the response finished does not change the replay', async () => {
    const { store } = spiedStore();
    let runs = 0;
    app = Fastify();
    await app.register(fastifyIdempotency, { store });
    const scratch = Buffer.alloc(16); // a response buffer the app reuses (a pool, a scratch area)
    app.post('/orders', async (_request, reply) => {
      runs++;
      scratch.fill(0x20);
      scratch.write(`{"run":${runs}}`);
      return reply.type('application/json').send(scratch);
    });
    const url = await app.listen({ port: 0, host: '127.0.0.1' });
    const key = v7();
    const first = await post(url, key);
    expect(first.status).toBe(200);
    await settle();
    // The response is on the wire and finished: Node is done with the buffer, the app may reuse it.
    scratch.fill(0x58);
    const retry = await post(url, key);
    expect(retry.replayed).toBe('true');
    expect(retry.body).toBe(first.body);
    expect(runs).toBe(1);
  });

  test('a small slice of a large buffer: the store keeps the slice, not the whole allocation it counts as the slice', async () => {
    const { store, finalized } = spiedStore({ maxSizeBytes: 1024 * 1024 });
    app = Fastify();
    await app.register(fastifyIdempotency, { store });
    app.post('/orders', async (_request, reply) => {
      const file = Buffer.alloc(16 * 1024 * 1024); // read whole, answered in part
      file.write('{"ok":true}');
      return reply.type('application/json').send(file.subarray(0, 11));
    });
    const url = await app.listen({ port: 0, host: '127.0.0.1' });
    const first = await post(url, v7());
    expect(first).toMatchObject({ status: 200, body: '{"ok":true}' });
    await settle();
    const body = finalized[0]?.body as Uint8Array;
    expect(body.byteLength).toBe(11);
    // The memory store's maxSizeBytes (1 MiB) is accounted by byteLength: the record must not hold 16 MiB alive.
    expect(body.buffer.byteLength).toBeLessThanOrEqual(1024 * 1024);
  });
});
