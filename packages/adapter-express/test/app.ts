import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pipeline, Readable } from 'node:stream';
import { captureRawBody, idempotencyMiddleware } from '@idem/adapter-express';
import { type AppResponse, BODY_KIND_TYPE, type MakeServer, toBodyKind } from '@idem/adapter-suite';
import type { Express, NextFunction, Request, Response } from 'express';

type Parser = (options?: {
  verify?: typeof captureRawBody;
  extended?: boolean;
}) => (req: Request, res: Response, next: () => void) => void;
type ExpressFactory = (() => Express) & {
  json: Parser;
  urlencoded: Parser;
  text: Parser;
  raw: (options?: { type?: string }) => (req: Request, res: Response, next: () => void) => void;
};

function send(res: Response, answer: AppResponse): void {
  res.status(answer.status).set(answer.headers).send(answer.body);
}

/** Express 4 does not pass a rejected promise on: every async handler forwards its own errors. */
const handle =
  (run: (req: Request, res: Response, next: NextFunction) => Promise<void> | void) =>
  (req: Request, res: Response, next: NextFunction) => {
    Promise.resolve()
      .then(() => run(req, res, next))
      .catch(next);
  };

/** The suite's routes on an Express app (4 or 5: the same code runs on both). */
export function expressServer(express: ExpressFactory): MakeServer {
  return async ({ options, business }) => {
    const app = express();
    app.use(
      express.json({ verify: captureRawBody }),
      express.urlencoded({ verify: captureRawBody, extended: false }),
      express.text({ verify: captureRawBody }),
    );
    // A body kind the suite names (an ArrayBuffer, a Blob, a typed array …), as a host's own middleware may set
    // it; and multipart bodies as bytes, for the boundary pairs.
    app.use(express.raw({ type: BODY_KIND_TYPE }), (req: Request, _res: Response, next: () => void) => {
      if (Buffer.isBuffer(req.body)) req.body = toBodyKind(req.get('x-body-kind'), req.body);
      next();
    });
    app.use(express.raw({ type: 'multipart/form-data' }));
    app.use(
      idempotencyMiddleware({
        ...options,
        scope:
          (options.scope as ((req: Request) => string | undefined) | undefined) ??
          ((req) => req.get('x-principal')),
      } as Parameters<typeof idempotencyMiddleware>[0]),
    );
    app.post('/orders', (req, res) => send(res, business.createOrder(req.body)));
    app.get('/orders', (_req, res) => send(res, business.listOrders()));
    app.post('/items/:id', (req, res) => send(res, business.item(String(req.params.id), req.body)));
    app.post('/status/:code', (req, res) => send(res, business.status(Number(req.params.code))));
    app.post('/throw', () => business.throws());
    app.post(
      '/slow/:ms',
      handle(async (req, res) => send(res, await business.slow(Number(req.params.ms)))),
    );
    app.post(
      '/late/:ms',
      handle(async (req, res) => {
        res.writeHead(200, { 'content-type': 'text/plain' });
        res.flushHeaders();
        res.end(await business.late(Number(req.params.ms)));
      }),
    );
    app.post('/plan/:name', (req, res, next) => {
      const chunks = business.plan(String(req.params.name));
      res.status(200).type('text/plain');
      pipeline(Readable.from(chunks), res, (error) => {
        if (error) next(error);
      });
    });
    app.post(
      '/throw-after/:point',
      handle(async (req, res) => {
        const run = business.throwAfter(String(req.params.point));
        res.writeHead(200, { 'content-type': 'text/plain' });
        res.flushHeaders();
        if (run.point !== 'status') res.write('first,');
        if (run.point === 'end') res.end('end');
        await new Promise((resolve) => setTimeout(resolve, 20));
        run.fail();
      }),
    );
    app.post('/destroy', (_req, res) => {
      business.destroy();
      setTimeout(() => res.destroy(), 10);
    });
    // No parser reads application/octet-stream: the handler streams the upload itself.
    app.put('/files/:id', (req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () =>
        send(res, business.upload(String(req.params.id), Buffer.concat(chunks).toString())),
      );
    });
    app.post('/big/:bytes', (req, res) => send(res, business.big(Number(req.params.bytes))));
    app.post('/binary', (_req, res) => send(res, business.binary()));
    // Quiet the default error handler's stack traces; the status is what the suite checks. A response
    // already under way cannot change its status any more: it is cut off, as Express itself does.
    app.use((_error: unknown, _req: Request, res: Response, _next: () => void) => {
      if (res.headersSent) {
        res.destroy();
        return;
      }
      res.status(500).json({ error: 'internal' });
    });
    const server: Server = await new Promise((resolve) => {
      const listening = app.listen(0, '127.0.0.1', () => resolve(listening));
    });
    const { port } = server.address() as AddressInfo;
    return {
      url: `http://127.0.0.1:${port}`,
      close: () =>
        new Promise<void>((resolve) => {
          server.closeAllConnections();
          server.close(() => resolve());
        }),
    };
  };
}
