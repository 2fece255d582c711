process.on('SIGTERM', () => process.exit(0)); // flush a --cpu-prof profile when the bench stops us

// One benchmark server per process, chosen by argv[2]; prints its port on stdout when listening.
import { createHash } from 'node:crypto';
import { createMemoryStore } from '@idem/store-memory';
import { Idempotency, IdempotencyError, type IdempotencyParams } from '@node-idempotency/core';
import { MemoryStorageAdapter } from '@node-idempotency/storage-adapter-memory';
import Fastify, { type FastifyInstance, type FastifyRequest } from 'fastify';
import { fastifyIdempotency } from '../src/index.js';

// What the variants keep on the request (decorated, so that Fastify keeps one request shape); not declared on
// FastifyRequest, which the package's tests share.
type BenchRequest = FastifyRequest & {
  rawBody?: string;
  floorKey?: string;
  floorFingerprint?: string;
  peerRequest?: IdempotencyParams;
};

const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/i;

/**
 * The floor: the least any Idempotency-Key plugin must do on Fastify. A UUIDv7 regex on the header (400 if it
 * is not one), the raw body from Fastify's own parser (`parseAs: 'string'`), a SHA-256 over method, URL and raw
 * body, a `Map` reserve (a completed key replays, an in-flight one answers 409, another fingerprint 422), the
 * sent payload taken in `onSend` and a `Map` finalize.
 */
function floor(app: FastifyInstance): void {
  type Entry = { fingerprint: string; done?: { status: number; type: string; payload: string } };
  const keys = new Map<string, Entry>();
  app.decorateRequest('rawBody', undefined);
  app.decorateRequest('floorKey', undefined);
  app.decorateRequest('floorFingerprint', undefined);
  // Fastify's own JSON parser (its proto-poisoning checks included), handed the string it read.
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    (request as BenchRequest).rawBody = body as string;
    void parseJson(request, body as string, done); // callback style: it calls done
  });
  app.addHook('preHandler', async (req, reply) => {
    const request = req as BenchRequest;
    const key = request.headers['idempotency-key'];
    if (key === undefined) return;
    if (typeof key !== 'string' || !UUID_V7.test(key)) {
      return reply.code(400).send({ error: 'Idempotency-Key must be a UUIDv7' });
    }
    const fingerprint = createHash('sha256')
      .update(`${request.method} ${request.url}\n`)
      .update(request.rawBody ?? '')
      .digest('base64url');
    const entry = keys.get(key);
    if (entry === undefined) {
      keys.set(key, { fingerprint });
      request.floorKey = key;
      request.floorFingerprint = fingerprint;
      return;
    }
    if (entry.fingerprint !== fingerprint)
      return reply.code(422).send({ error: 'key reused, other request' });
    if (entry.done === undefined) return reply.code(409).send({ error: 'request in flight' });
    return reply.code(entry.done.status).type(entry.done.type).send(entry.done.payload);
  });
  app.addHook('onSend', async (req, reply, payload) => {
    const request = req as BenchRequest;
    if (request.floorKey === undefined) return payload;
    if (reply.statusCode >= 500 || typeof payload !== 'string') {
      keys.delete(request.floorKey); // a server error (or a stream) is not kept: a retry runs again
      return payload;
    }
    const type = String(reply.getHeader('content-type') ?? 'application/json');
    const done = { status: reply.statusCode, type, payload };
    keys.set(request.floorKey, { fingerprint: request.floorFingerprint as string, done });
    return payload;
  });
}

// The HTTP statuses of @node-idempotency's errors, as its own framework wrapper maps them
// (@node-idempotency/shared's idempotency2HttpCodeMap).
const peerStatus: Record<string, number> = {
  IDEMPOTENCY_FINGERPRINT_MISSMATCH: 422,
  IDEMPOTENCY_KEY_LEN_EXEEDED: 400,
  IDEMPOTENCY_KEY_MISSING: 400,
  REQUEST_IN_PROGRESS: 409,
};

/**
 * @node-idempotency/core 1.0.11 glued to Fastify as its README describes: `onRequest` before the handler (in
 * `preHandler`, as it fingerprints the parsed body), replaying `response.body` with
 * `response.additional.status` when it returns one; `onResponse` with the sent payload (`onSend`) and the
 * status, awaited before the answer leaves. Its in-memory `MemoryStorageAdapter`, default options.
 */
function nodeIdempotency(app: FastifyInstance): void {
  const idempotency = new Idempotency(new MemoryStorageAdapter());
  app.decorateRequest('peerRequest', undefined);
  app.addHook('preHandler', async (request, reply) => {
    const params: IdempotencyParams = {
      method: request.method,
      headers: request.headers,
      body: request.body as Record<string, unknown>,
      path: request.url,
    };
    try {
      const response = await idempotency.onRequest(params);
      if (!response) {
        (request as BenchRequest).peerRequest = params; // a new request: the handler runs
        return;
      }
      const { status, contentType } = response.additional as { status: number; contentType: string };
      return reply.code(status).type(contentType).header('idempotent-replayed', 'true').send(response.body);
    } catch (error) {
      if (!(error instanceof IdempotencyError)) throw error;
      return reply.code(peerStatus[error.code] ?? 500).send({ error: error.message });
    }
  });
  app.addHook('onSend', async (request, reply, payload) => {
    const params = (request as BenchRequest).peerRequest;
    if (params !== undefined) {
      const contentType = String(reply.getHeader('content-type') ?? 'application/json');
      await idempotency.onResponse(params, {
        body: payload,
        additional: { status: reply.statusCode, contentType },
      });
    }
    return payload;
  });
}

const variant = process.argv[2];
const app = Fastify();
if (variant === 'idem') await app.register(fastifyIdempotency, { store: createMemoryStore() });
// The plugin with every request's fingerprint a constant: what the fingerprint costs, by taking it out
// (`scripts/ab.ts bench/server.ts idem idem-constant-fingerprint`; not a variant the bench runs).
if (variant === 'idem-constant-fingerprint') {
  await app.register(fastifyIdempotency, { store: createMemoryStore(), fingerprint: () => 'constant' });
}
// The plugin with a fingerprint of the floor's kind (`createHash` over method, path and the body's bytes as sent,
// through the `fingerprint` option): what the canonical JSON of design.md's fingerprint costs against hashing the
// bytes (`scripts/ab.ts bench/server.ts idem idem-bytes-fingerprint`; not a variant the bench runs). Only for
// this bench: given a function, the coordinator no longer refuses a body nobody read, which this one ignores.
if (variant === 'idem-bytes-fingerprint') {
  await app.register(fastifyIdempotency, {
    store: createMemoryStore(),
    fingerprint: ({ method, path, body }) => {
      const hash = createHash('sha256').update(`${method} ${path}\n`);
      if (typeof body === 'string' || body instanceof Uint8Array) hash.update(body);
      return hash.digest('hex');
    },
  });
}
if (variant === 'floor') floor(app);
if (variant === 'node-idempotency') nodeIdempotency(app);
if (variant === 'noop-hooks') {
  app.addHook('preHandler', async () => {});
  app.addHook('onSend', async (_request, _reply, payload) => payload);
  app.addHook('onResponse', async () => {});
}
let orders = 0;
app.post<{ Body: { item: string; lines: unknown[] } }>('/orders', async (request, reply) => {
  orders++;
  return reply.code(201).send({ id: orders, item: request.body.item, lines: request.body.lines.length });
});
app.get('/count', async () => ({ orders }));
await app.listen({ port: 0, host: '127.0.0.1' });
const address = app.server.address();
console.log(typeof address === 'object' && address ? address.port : 0);
