import { errorResponse, IdemInProgressError, IdemKeyReusedError } from '@idem/core';
import { describe, expect, test } from 'vitest';

const inProgress = () =>
  new IdemInProgressError('the first request with this key still runs', { retryAfterSeconds: 2 });
const defaultBody = (error: IdemInProgressError) => JSON.stringify(error.toJSON());

describe('errorResponse', () => {
  test('without formatError: the status, the headers the answer needs, a JSON content type, toJSON()', () => {
    const error = inProgress();
    expect(errorResponse(error, undefined)).toEqual({
      status: 409,
      headers: { 'retry-after': '2', 'content-type': 'application/json; charset=utf-8' },
      body: defaultBody(error),
    });
  });

  test("the host's format, called with the error and the framework's request", () => {
    const error = new IdemKeyReusedError('another request had this key');
    const host = { id: 'req-7' };
    const answer = errorResponse(error, host, (e, request) => ({ problem: e.code, request: request.id }));
    expect(answer.status).toBe(422);
    expect(JSON.parse(answer.body)).toEqual({ problem: 'IDEMPOTENCY_KEY_REUSED', request: 'req-7' });
    expect(answer.headers).toEqual({ 'content-type': 'application/json; charset=utf-8' });
  });

  const cycle: Record<string, unknown> = {};
  cycle.self = cycle;
  test.each([
    [
      'throws',
      () => {
        throw new Error('broken formatter');
      },
    ],
    ['returns a BigInt', () => ({ amount: 10n })],
    ['returns a cycle', () => cycle],
    ['returns undefined', () => undefined],
    ['returns a function', () => () => 1],
  ])('a formatError that %s: the default body, the status kept', (_, formatError) => {
    const error = inProgress();
    const answer = errorResponse(error, undefined, formatError);
    expect(answer.status).toBe(409);
    expect(answer.body).toBe(defaultBody(error));
  });
});
