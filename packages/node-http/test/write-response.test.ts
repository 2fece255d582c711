import { errorResponse, IdemInProgressError, toReplayResponse } from '@idem/core';
import { writeResponse } from '@idem/node-http';
import { afterEach, describe, expect, test } from 'vitest';
import { type Handler, listen, send } from './support.js';

let close: (() => Promise<void>) | undefined;
afterEach(async () => {
  await close?.();
  close = undefined;
});

async function answer(handler: Handler) {
  const server = await listen(handler);
  close = server.close;
  return send(server.port);
}

describe('writeResponse', () => {
  test('a replay: its status, headers and exact bytes', async () => {
    const replay = toReplayResponse({
      status: 201,
      headers: { location: '/orders/1', 'content-type': 'application/octet-stream' },
      body: new Uint8Array([104, 105]),
    });
    expect(await answer((_req, res) => writeResponse(res, replay))).toMatchObject({
      status: 201,
      headers: { location: '/orders/1', 'idempotent-replayed': 'true', 'content-length': '2' },
      body: 'hi',
    });
  });

  test('a replay without its body: the status and headers, an empty body', async () => {
    const replay = toReplayResponse({ status: 200, headers: {}, body: null, bodyOmitted: true });
    expect(await answer((_req, res) => writeResponse(res, replay))).toMatchObject({
      status: 200,
      headers: { 'idempotent-replay-body-omitted': 'true', 'content-length': '0' },
      body: '',
    });
  });

  test("the coordinator's own answer", async () => {
    const error = new IdemInProgressError('busy', { retryAfterSeconds: 1 });
    expect(await answer((_req, res) => writeResponse(res, errorResponse(error, undefined)))).toMatchObject({
      status: 409,
      headers: { 'retry-after': '1', 'content-type': 'application/json; charset=utf-8' },
      body: JSON.stringify(error.toJSON()),
    });
  });
});
