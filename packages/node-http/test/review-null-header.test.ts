import { createIdempotency } from '@idem/core';
import { describeRequest, startExecution, writeResponse } from '@idem/node-http';
import { createMemoryStore } from '@idem/store-memory';
import { v7 } from 'uuid';
import { afterEach, beforeEach, expect, test } from 'vitest';
import { listen, send } from './support.js';

const unhandled: unknown[] = [];
const onUnhandled = (reason: unknown) => unhandled.push(reason);
beforeEach(() => process.on('unhandledRejection', onUnhandled));
afterEach(() => {
  process.off('unhandledRejection', onUnhandled);
});

test('a handler that sets an allow-listed header to null: no unhandled rejection, the key is settled', async () => {
  const store = createMemoryStore({ sweepIntervalMs: false });
  const idem = createIdempotency({ store });
  const server = await listen(async (req, res) => {
    const result = await idem.begin(
      describeRequest(idem, res, {
        method: 'POST',
        url: '/',
        headers: req.headers,
        route: '/',
        body: undefined,
        host: req,
      }),
    );
    if (result.action === 'execute' && (await startExecution(result.execution, res))) {
      res.setHeader('Location', null as unknown as string); // Node accepts it, and sends "null"
      res.statusCode = 201;
      res.end('made');
    } else if (result.action === 'replay') writeResponse(res, result.response);
    else res.end('other');
  });
  const key = v7();
  try {
    expect(await send(server.port, { headers: { 'idempotency-key': key } })).toMatchObject({ status: 201 });
    await new Promise((r) => setTimeout(r, 50));
    // The retry replays: the key was settled, not left blocked for the lease.
    const again = await send(server.port, { headers: { 'idempotency-key': key } });
    expect({ unhandled: unhandled.map(String), replayed: (again as { status?: number }).status }).toEqual({
      unhandled: [],
      replayed: 201,
    });
  } finally {
    await server.close();
  }
});
