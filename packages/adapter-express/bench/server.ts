process.on('SIGTERM', () => process.exit(0));

// One benchmark server per process, chosen by argv[2]; prints its port on stdout when listening.
import { createHash } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createMemoryStore } from '@idem/store-memory';
import { Idempotency, IdempotencyError, type IdempotencyParams } from '@node-idempotency/core';
import { MemoryStorageAdapter } from '@node-idempotency/storage-adapter-memory';
import express, { type Request, type RequestHandler } from 'express';
import { idempotency as expressIdempotency, getSharedIdempotencyService } from 'express-idempotency';
import { captureRawBody, idempotencyMiddleware } from '../src/index.js';

const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/i;

/** The payload `res.end` was handed, as text (Express's `res.send` passes a string or a Buffer). */
const sent = (chunk: unknown): string | undefined =>
  typeof chunk === 'string' ? chunk : Buffer.isBuffer(chunk) ? chunk.toString() : undefined;
const contentType = (res: ServerResponse): string =>
  String(res.getHeader('content-type') ?? 'application/json');

/**
 * The floor: the least any Idempotency-Key middleware must do on Express. A UUIDv7 regex on the header (400 if
 * it is not one), the raw body from Express's own parser (`express.json({ verify })`, mounted by the caller), a
 * SHA-256 over method, URL and raw body, a `Map` reserve (a completed key replays, an in-flight one answers 409,
 * another fingerprint 422), the sent payload taken where Express hands it over (`res.end`'s chunk) and a `Map`
 * finalize.
 */
function floor(): RequestHandler {
  type Entry = { fingerprint: string; done?: { status: number; type: string; payload: string } };
  const keys = new Map<string, Entry>();
  return (req, res, next) => {
    const key = req.headers['idempotency-key'];
    if (key === undefined) return next();
    if (typeof key !== 'string' || !UUID_V7.test(key)) {
      return res.status(400).json({ error: 'Idempotency-Key must be a UUIDv7' });
    }
    const fingerprint = createHash('sha256')
      .update(`${req.method} ${req.originalUrl}\n`)
      .update((req as Request & { rawBody?: Buffer }).rawBody ?? '')
      .digest('base64url');
    const entry = keys.get(key);
    if (entry !== undefined) {
      if (entry.fingerprint !== fingerprint)
        return res.status(422).json({ error: 'key reused, other request' });
      if (entry.done === undefined) return res.status(409).json({ error: 'request in flight' });
      return res.status(entry.done.status).type(entry.done.type).send(entry.done.payload);
    }
    keys.set(key, { fingerprint });
    const end = res.end;
    res.end = function (this: ServerResponse, chunk?: unknown, ...rest: unknown[]) {
      const payload = sent(chunk);
      // A server error (or a body written in pieces) is not kept: a retry runs again.
      if (res.statusCode >= 500 || payload === undefined) keys.delete(key);
      else keys.set(key, { fingerprint, done: { status: res.statusCode, type: contentType(res), payload } });
      return (end as (...args: unknown[]) => ServerResponse).call(this, chunk, ...rest);
    } as typeof res.end;
    next();
  };
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
 * @node-idempotency/core 1.0.11 glued to Express as its README describes: `onRequest` before the handler (a
 * middleware after `express.json()`, as it fingerprints the parsed body), replaying `response.body` with
 * `response.additional.status` when it returns one; `onResponse` with the sent payload (`res.end`'s chunk)
 * and the status, the answer leaving once it resolved. Its in-memory `MemoryStorageAdapter`, default options.
 */
function nodeIdempotency(): RequestHandler {
  const idempotency = new Idempotency(new MemoryStorageAdapter());
  return (req, res, next) => {
    const params: IdempotencyParams = {
      method: req.method,
      headers: req.headers,
      body: req.body as Record<string, unknown>,
      path: req.originalUrl,
    };
    idempotency.onRequest(params).then(
      (response) => {
        if (response) {
          const { status, contentType } = response.additional as { status: number; contentType: string };
          res.status(status).type(contentType).set('idempotent-replayed', 'true').send(response.body);
          return;
        }
        const end = res.end;
        res.end = function (this: ServerResponse, chunk?: unknown, ...rest: unknown[]) {
          const finish = () => (end as (...args: unknown[]) => ServerResponse).call(this, chunk, ...rest);
          idempotency
            .onResponse(params, {
              body: sent(chunk),
              additional: { status: res.statusCode, contentType: contentType(res) },
            })
            .then(finish, finish);
          return this;
        } as typeof res.end;
        next();
      },
      (error: unknown) => {
        if (!(error instanceof IdempotencyError)) return next(error);
        res.status(peerStatus[error.code] ?? 500).json({ error: error.message });
      },
    );
  };
}

const variant = process.argv[2];
const app = express();
// The floor and idem hash the raw body, kept by the parser's `verify` (idem's as its README mounts it); the
// others fingerprint the parsed body.
const keepRawBody = (req: IncomingMessage, _res: ServerResponse, buffer: Buffer) => {
  (req as IncomingMessage & { rawBody?: Buffer }).rawBody = buffer;
};
if (variant === 'floor') app.use(express.json({ verify: keepRawBody }));
else if (variant === 'idem') app.use(express.json({ verify: captureRawBody }));
else app.use(express.json());
if (variant === 'floor') app.use(floor());
if (variant === 'node-idempotency') app.use(nodeIdempotency());
if (variant === 'idem') app.use(idempotencyMiddleware({ store: createMemoryStore() }));
if (variant === 'express-idempotency') app.use(expressIdempotency());
let orders = 0;
app.post('/orders', (req, res) => {
  // express-idempotency calls the handler for a hit too; the handler must ask.
  if (variant === 'express-idempotency' && getSharedIdempotencyService().isHit(req)) return;
  orders++;
  res.status(201).json({ id: orders, item: req.body.item, lines: req.body.lines.length });
});
app.get('/count', (_req, res) => res.json({ orders }));
const server = app.listen(0, '127.0.0.1', () => {
  const address = server.address();
  console.log(typeof address === 'object' && address ? address.port : 0);
});
