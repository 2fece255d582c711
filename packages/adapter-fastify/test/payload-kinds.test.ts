import { Readable } from 'node:stream';
import { fastifyIdempotency } from '@idem/adapter-fastify';
import { newKey } from '@idem/adapter-suite';
import { createMemoryStore } from '@idem/store-memory';
import Fastify, { type FastifyReply } from 'fastify';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';

// Every kind of payload Fastify 5 can send is stored as the client received it, and replayed exactly:
// never an empty body with a 200.

const text = (parts: string[]) => new TextEncoder().encode(parts.join(''));
const kinds: Record<string, (reply: FastifyReply) => unknown> = {
  string: (reply) => reply.code(201).type('text/plain').send('a string'),
  buffer: (reply) =>
    reply
      .code(201)
      .type('application/octet-stream')
      .send(Buffer.from([0, 1, 255])),
  'Node stream': (reply) =>
    reply
      .code(201)
      .type('text/plain')
      .send(Readable.from(['node ', 'stream'])),
  'web ReadableStream': (reply) =>
    reply
      .code(201)
      .type('text/plain')
      .send(
        new ReadableStream({
          start(controller) {
            controller.enqueue(text(['web ']));
            controller.enqueue(text(['stream']));
            controller.close();
          },
        }),
      ),
  'Response object': (reply) =>
    reply.send(new Response('a response', { status: 202, headers: { 'content-type': 'text/plain' } })),
  'reply.hijack()': (reply) => {
    reply.hijack();
    reply.raw.writeHead(201, { 'content-type': 'text/plain' });
    reply.raw.write('hijacked ');
    reply.raw.end('reply');
  },
};

const slug = (kind: string) => kind.replace(/[^a-z]+/gi, '-');
let url: string;
const runs = new Map<string, number>();
const app = Fastify();
beforeAll(async () => {
  await app.register(fastifyIdempotency, { store: createMemoryStore({ sweepIntervalMs: false }) });
  for (const [kind, send] of Object.entries(kinds)) {
    app.post(`/${slug(kind)}`, async (_request, reply) => {
      runs.set(kind, (runs.get(kind) ?? 0) + 1);
      return send(reply);
    });
  }
  url = await app.listen({ port: 0, host: '127.0.0.1' });
});
afterAll(() => app.close());

describe('Fastify payload kinds are stored exactly', () => {
  for (const kind of Object.keys(kinds)) {
    test(`${kind}: the retry replays the same status, type and bytes; the handler ran once`, async () => {
      const key = newKey();
      const post = async () => {
        const response = await fetch(`${url}/${slug(kind)}`, {
          method: 'POST',
          headers: { 'idempotency-key': key, 'content-type': 'application/json' },
          body: '{}',
        });
        return { response, bytes: Buffer.from(await response.arrayBuffer()) };
      };
      const first = await post();
      await new Promise((resolve) => setTimeout(resolve, 20)); // the record settles after the response
      const retry = await post();
      expect(first.bytes.length).toBeGreaterThan(0);
      expect(retry.response.headers.get('idempotent-replayed')).toBe('true');
      expect(retry.response.status).toBe(first.response.status);
      expect(retry.response.headers.get('content-type')).toBe(first.response.headers.get('content-type'));
      expect(retry.bytes.equals(first.bytes)).toBe(true);
      expect(runs.get(kind)).toBe(1);
    });
  }
});
