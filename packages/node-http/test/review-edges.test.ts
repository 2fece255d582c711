import type { IncomingMessage, ServerResponse } from 'node:http';
import { connect } from 'node:net';
import { createIdempotency, errorResponse, type IdempotencyEvent, type IdempotencyOptions } from '@idem/core';
import { describeRequest, startExecution, writeResponse } from '@idem/node-http';
import { createMemoryStore } from '@idem/store-memory';
import { v7 } from 'uuid';
import { afterEach, describe, expect, test } from 'vitest';
import { listen, send } from './support.js';

let close: (() => Promise<void>) | undefined;
afterEach(async () => {
  await close?.();
  close = undefined;
});

type App = (req: IncomingMessage, res: ServerResponse, body: Buffer) => unknown;

/** A bare Node server with the node-http layer in front of `app`, over a real coordinator and store. */
async function serve(
  app: App,
  options: Partial<IdempotencyOptions> = {},
  formatError?: (e: unknown) => unknown,
) {
  const store = createMemoryStore({ sweepIntervalMs: false });
  const events: IdempotencyEvent[] = [];
  const idem = createIdempotency({ store, onEvent: (e) => events.push(e), ...options });
  let runs = 0;
  const server = await listen(async (req, res) => {
    const chunks: Buffer[] = [];
    try {
      for await (const chunk of req) chunks.push(chunk as Buffer);
    } catch {
      return; // the client hung up mid-upload (this harness's own read)
    }
    const body = Buffer.concat(chunks);
    const url = req.url ?? '/';
    const result = await idem.begin(
      describeRequest(idem, res, {
        method: req.method ?? 'GET',
        url,
        headers: req.headers,
        route: url.split('?')[0] ?? '/',
        body: body.length === 0 ? undefined : body,
        host: req,
      }),
    );
    switch (result.action) {
      case 'proceed':
        runs++;
        return app(req, res, body);
      case 'reject':
        return writeResponse(res, errorResponse(result.error, req, formatError));
      case 'replay':
        return writeResponse(res, result.response);
      default:
        if (await startExecution(result.execution, res)) {
          runs++;
          return app(req, res, body);
        }
    }
  });
  close = server.close;
  return { port: server.port, events, store, runs: () => runs };
}

const settle = () => new Promise((r) => setTimeout(r, 30));

describe('node-http edges, with a real coordinator', () => {
  test('writeHead with an array of headers: stored and replayed', async () => {
    const s = await serve((_req, res) => {
      res.writeHead(201, ['Content-Type', 'text/plain', 'Location', '/o/1', 'Set-Cookie', 'a=b']);
      res.end('made');
    });
    const key = v7();
    expect(await send(s.port, { headers: { 'idempotency-key': key } })).toMatchObject({
      status: 201,
      body: 'made',
    });
    await settle();
    const replay = await send(s.port, { headers: { 'idempotency-key': key } });
    expect(replay).toMatchObject({
      status: 201,
      body: 'made',
      headers: { 'content-type': 'text/plain', location: '/o/1', 'idempotent-replayed': 'true' },
    });
    expect((replay as { headers: Record<string, unknown> }).headers['set-cookie']).toBeUndefined();
    expect(s.runs()).toBe(1);
  });

  test('res.end with a callback only, and with (chunk, callback)', async () => {
    const s = await serve((req, res) => {
      res.statusCode = 201;
      if (req.url === '/a') {
        res.write('x');
        res.end(() => {});
      } else res.end('y', () => {});
    });
    for (const path of ['/a', '/b']) {
      const key = v7();
      await send(s.port, { path, headers: { 'idempotency-key': key } });
      await settle();
      expect(await send(s.port, { path, headers: { 'idempotency-key': key } })).toMatchObject({
        status: 201,
        body: path === '/a' ? 'x' : 'y',
      });
    }
    expect(s.runs()).toBe(2);
  });

  test('the response destroyed by the server before any status: the key is released (the retry runs)', async () => {
    const s = await serve((_req, res) => {
      setTimeout(() => res.destroy(), 5);
    });
    const key = v7();
    expect(await send(s.port, { headers: { 'idempotency-key': key } })).toHaveProperty('error');
    await settle();
    expect(s.events.map((e) => e.type)).toEqual(['reserved', 'released']);
  });

  test('the response destroyed after the status: stored without its body', async () => {
    const s = await serve((_req, res) => {
      res.writeHead(201, { 'content-type': 'text/plain' });
      res.write('part');
      setTimeout(() => res.destroy(), 5);
    });
    const key = v7();
    await send(s.port, { headers: { 'idempotency-key': key } });
    await settle();
    const replay = await send(s.port, { headers: { 'idempotency-key': key } });
    expect(replay).toMatchObject({
      status: 201,
      body: '',
      headers: { 'idempotent-replay-body-omitted': 'true' },
    });
  });

  test('the key header sent twice: 400, handler not run', async () => {
    const s = await serve((_req, res) => res.end('ran'));
    const key = v7();
    expect(await send(s.port, { headers: { 'idempotency-key': [key, key] } })).toMatchObject({ status: 400 });
    expect(s.runs()).toBe(0);
  });

  test('a URL with "?" only: the same (empty) query pairs as none, so a replay', async () => {
    const s = await serve((_req, res) => {
      res.statusCode = 201;
      res.end('ok');
    });
    const key = v7();
    expect(await send(s.port, { path: '/o', headers: { 'idempotency-key': key } })).toMatchObject({
      status: 201,
    });
    await settle();
    expect(await send(s.port, { path: '/o?', headers: { 'idempotency-key': key } })).toMatchObject({
      status: 201,
      headers: { 'idempotent-replayed': 'true' },
    });
  });

  test('HEAD when covered: replay has no body and does not hang', async () => {
    const s = await serve(
      (_req, res) => {
        res.writeHead(200, { 'content-type': 'text/plain', 'content-length': '5' });
        res.end();
      },
      { methods: ['HEAD', 'POST'] },
    );
    const key = v7();
    expect(await send(s.port, { method: 'HEAD', headers: { 'idempotency-key': key } })).toMatchObject({
      status: 200,
    });
    await settle();
    expect(await send(s.port, { method: 'HEAD', headers: { 'idempotency-key': key } })).toMatchObject({
      status: 200,
      headers: { 'idempotent-replayed': 'true' },
    });
  });

  test('no body, content-length 0 and chunked bodies: each answered, the same key replayed', async () => {
    const s = await serve((_req, res, body) => {
      res.statusCode = 201;
      res.end(`got ${body.length}`);
    });
    for (const headers of [{}, { 'content-length': '0' }, { 'transfer-encoding': 'chunked' }]) {
      const key = v7();
      const first = await send(s.port, { headers: { 'idempotency-key': key, ...headers }, body: '' });
      expect(first).toMatchObject({ status: 201 });
      await settle();
      expect(await send(s.port, { headers: { 'idempotency-key': key, ...headers }, body: '' })).toMatchObject(
        {
          status: 201,
          headers: { 'idempotent-replayed': 'true' },
        },
      );
    }
  });

  test('formatError that throws, returns undefined, a BigInt, a function, a symbol: the default body', async () => {
    const bad = [
      () => {
        throw new Error('x');
      },
      () => undefined,
      () => 10n,
      () => () => 1,
      () => Symbol('s'),
      () => ({
        toJSON: () => {
          throw new Error('y');
        },
      }),
    ];
    for (const formatError of bad) {
      const s = await serve((_req, res) => res.end(), { required: true }, formatError);
      const answer = await send(s.port, {});
      expect(answer).toMatchObject({ status: 400 });
      expect(JSON.parse((answer as { body: string }).body)).toMatchObject({
        error: { code: 'IDEMPOTENCY_KEY_MISSING' },
      });
      await close?.();
      close = undefined;
    }
  });

  test('a client that aborts mid-upload before begin: nothing reserved, no crash', async () => {
    const s = await serve((_req, res) => res.end('ran'));
    await new Promise<void>((resolve) => {
      const socket = connect(s.port, '127.0.0.1', () => {
        socket.write(
          `POST / HTTP/1.1\r\nhost: x\r\ncontent-length: 100\r\nidempotency-key: ${v7()}\r\n\r\nabc`,
          () => setTimeout(() => socket.destroy(), 20),
        );
      });
      socket.on('close', () => resolve());
      socket.on('error', () => resolve());
    });
    await settle();
    expect(s.runs()).toBe(0);
  });
});
