import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { idempotency } from '@idem/adapter-express';
import type { AppResponse, MakeServer } from '@idem/adapter-suite';
import type { Express, Request, Response } from 'express';

type ExpressFactory = (() => Express) & { json(): (req: Request, res: Response, next: () => void) => void };

function send(res: Response, answer: AppResponse): void {
  res.status(answer.status).set(answer.headers).send(answer.body);
}

/** The suite's routes on an Express app (4 or 5: the same code runs on both). */
export function expressServer(express: ExpressFactory): MakeServer {
  return async ({ options, business }) => {
    const app = express();
    app.use(express.json());
    app.use(idempotency({ ...options, scope: (req) => req.get('x-principal') }));
    app.post('/orders', (req, res) => send(res, business.createOrder(req.body)));
    app.get('/orders', (_req, res) => send(res, business.listOrders()));
    app.post('/status/:code', (req, res) => send(res, business.status(Number(req.params.code))));
    app.post('/throw', () => business.throws());
    app.post('/slow/:ms', (req, res, next) => {
      business.slow(Number(req.params.ms)).then((answer) => send(res, answer), next);
    });
    app.post('/stream', async (_req, res) => {
      const { chunks, delayMs } = business.stream();
      res.status(200).type('text/plain');
      for (const chunk of chunks) {
        res.write(chunk);
        await new Promise((resolve) => setTimeout(resolve, delayMs));
      }
      res.end();
    });
    app.post('/big/:bytes', (req, res) => send(res, business.big(Number(req.params.bytes))));
    app.post('/binary', (_req, res) => send(res, business.binary()));
    // Quiet the default error handler's stack traces; the status is what the suite checks.
    app.use((_error: unknown, _req: Request, res: Response, _next: () => void) => {
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
