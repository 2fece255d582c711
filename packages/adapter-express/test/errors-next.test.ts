import type { AddressInfo } from 'node:net';
import { idempotencyMiddleware } from '@idem/adapter-express';
import { isIdemError } from '@idem/core';
import { createMemoryStore } from '@idem/store-memory';
import express, { type NextFunction, type Request, type Response } from 'express';
import { expect, test } from 'vitest';

test("errors: 'next' hands the typed error, with its status and headers, to the app's error handler", async () => {
  const app = express();
  app.use(express.json());
  app.use(
    idempotencyMiddleware({
      store: createMemoryStore({ sweepIntervalMs: false }),
      errors: 'next',
      required: true,
    }),
  );
  app.post('/orders', (_req, res) => res.status(201).json({ ok: true }));
  app.use((error: unknown, _req: Request, res: Response, _next: NextFunction) => {
    if (!isIdemError(error)) return res.status(500).end();
    res.status(error.status).set(error.headers).json({ problem: error.code });
  });
  const server = app.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/orders`;
  try {
    const missing = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{}',
    });
    expect(missing.status).toBe(400);
    expect(await missing.json()).toEqual({ problem: 'IDEMPOTENCY_KEY_MISSING' });
    const invalid = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': 'nope' },
      body: '{}',
    });
    expect(await invalid.json()).toEqual({ problem: 'IDEMPOTENCY_KEY_INVALID' });
  } finally {
    server.close();
  }
});
