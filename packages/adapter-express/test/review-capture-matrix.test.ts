import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { captureRawBody, idempotencyMiddleware } from '@idem/adapter-express';
import { createMemoryStore } from '@idem/store-memory';
import compression from 'compression';
import express, { type RequestHandler, type Response } from 'express';
import { v7 } from 'uuid';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';

// Review: Express uses settleOnResponse without handOver; every way of writing a response is still captured
// (the writeHead/write/end wrappers now forward `arguments` and skip reading a head that passes only a status).

const runs = new Map<string, number>();
let base: string;
let close: () => void;

const routes: Record<string, (res: Response) => void> = {
  json: (res) => void res.status(201).json({ a: 1 }),
  'send buffer': (res) =>
    void res
      .status(201)
      .type('application/octet-stream')
      .send(Buffer.from([0, 255, 1])),
  'write then end': (res) => {
    res.status(201).type('text/plain');
    res.write('first,');
    res.write(Buffer.from('second,'));
    res.end('third');
  },
  'write with an encoding': (res) => {
    res.status(201).type('text/plain');
    res.write('68656c6c6f', 'hex');
    res.end(' world', 'latin1');
  },
  'writeHead with a headers object': (res) => {
    res.writeHead(202, { 'content-type': 'text/plain', etag: '"obj"' });
    res.end('object head');
  },
  'writeHead with a status message and headers': (res) => {
    res.writeHead(202, 'Accepted Later', { 'content-type': 'text/plain', etag: '"msg"' });
    res.end('message head');
  },
  'writeHead with the raw array form': (res) => {
    res.writeHead(203, ['content-type', 'text/plain', 'etag', '"arr"']);
    res.end('array head');
  },
  'writeHead with a status only, headers set before': (res) => {
    res.setHeader('content-type', 'text/plain');
    res.setHeader('etag', '"set"');
    res.writeHead(201);
    res.end('status only');
  },
  'end with a callback only': (res) => {
    res.status(201).type('text/plain');
    res.write('before the callback');
    res.end(() => undefined);
  },
  'a Node stream piped': (res) => {
    res.status(201).type('text/plain');
    Readable.from(['piped ', 'stream ', 'chunks']).pipe(res);
  },
  'an empty 204': (res) => void res.status(204).end(),
  'flushHeaders then writes': (res) => {
    res.status(201).type('text/plain');
    res.flushHeaders();
    res.write('flushed ');
    setTimeout(() => res.end('late'), 10);
  },
};

beforeAll(async () => {
  const app = express();
  app.use(express.json({ verify: captureRawBody }));
  const idem = idempotencyMiddleware({ store: createMemoryStore({ sweepIntervalMs: false }) });
  const compress = compression({ threshold: 0 }) as unknown as RequestHandler;
  for (const [mount, chain] of [
    ['plain', [idem]],
    ['compression-first', [compress, idem]],
    ['idempotency-first', [idem, compress]],
  ] as const) {
    for (const [name, handler] of Object.entries(routes)) {
      app.post(`/${mount}/${name.replace(/[^a-z]+/gi, '-')}`, ...chain, (req, res) => {
        const key = String(req.headers['idempotency-key']);
        runs.set(key, (runs.get(key) ?? 0) + 1);
        handler(res);
      });
    }
  }
  const server = app.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  close = () => server.close();
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => close());

async function post(path: string, key: string, encoding: string) {
  const response = await fetch(`${base}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': key, 'accept-encoding': encoding },
    body: '{"x":1}',
  });
  return {
    status: response.status,
    type: response.headers.get('content-type'),
    etag: response.headers.get('etag'),
    text: await response.text(), // decoded by fetch
    replayed: response.headers.get('idempotent-replayed'),
  };
}

describe('Express: every way of writing is captured and replayed, the handler once', () => {
  for (const mount of ['plain', 'compression-first', 'idempotency-first']) {
    for (const name of Object.keys(routes)) {
      // compression's own end() cannot take a callback alone (Buffer.from(function) throws, with or without us)
      if (mount !== 'plain' && name === 'end with a callback only') continue;
      for (const encoding of ['identity', 'gzip']) {
        test(`${mount}: ${name} (${encoding})`, async () => {
          const key = v7();
          const path = `/${mount}/${name.replace(/[^a-z]+/gi, '-')}`;
          const first = await post(path, key, encoding);
          await new Promise((resolve) => setTimeout(resolve, 30));
          const retry = await post(path, key, encoding);
          expect(retry).toEqual({ ...first, replayed: 'true' });
          expect(runs.get(key)).toBe(1);
        });
      }
    }
  }
});
