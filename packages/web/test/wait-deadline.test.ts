import { createMemoryStore } from '@idem/store-memory';
import { withIdempotency } from '@idem/web';
import { v7 } from 'uuid';
import { describe, expect, test } from 'vitest';

// The `wait` strategy together with the host's request `deadline` (IdempotencyOptions.deadline: "When the host
// must have answered this request"). A duplicate that waits behind a slow first request is answered by its
// deadline, as a wait that ran out (design.md: "then 409 or 503 with `Retry-After`"), not at its next poll.

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const post = (key: string) =>
  new Request('https://api.example/orders', {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': key },
    body: '{"item":"book"}',
  });

describe('a waiting duplicate is answered by its deadline', () => {
  test.each([
    [undefined, 409],
    [503, 503],
  ] as const)(
    'default poll backoff, timeout status %s: %s with Retry-After by the deadline',
    async (timeoutStatus, status) => {
      const deadlines = new WeakMap<Request, number>();
      let runs = 0;
      const handler = withIdempotency(
        async () => {
          runs++;
          await sleep(1_500); // the first request is slow
          return Response.json({ ok: true }, { status: 201 });
        },
        {
          store: createMemoryStore(),
          // default initialPollMs / maxPollMs: the polls come at 25, 75, 175, 375, 775, 1275 … ms
          inFlight: { strategy: 'wait', maxWaitMs: 10_000, ...(timeoutStatus ? { timeoutStatus } : {}) },
          deadline: (request) => deadlines.get(request.host as Request),
        },
      );
      const key = v7();
      const first = handler(post(key));
      await sleep(20);
      const duplicate = post(key);
      const startedMs = performance.now();
      deadlines.set(duplicate, startedMs + 800); // the host must answer within 800 ms
      const answer = await handler(duplicate);
      const tookMs = performance.now() - startedMs;
      const body = (await answer.json()) as { error: { code: string } };
      await (await first).text();
      expect(runs).toBe(1);
      // 150 ms of slack for a loaded machine: the poll after the deadline is 475 ms later.
      expect({
        status: answer.status,
        code: body.error.code,
        retryAfter: answer.headers.get('retry-after'),
        late: tookMs > 800 + 150,
      }).toEqual({ status, code: 'IDEMPOTENCY_IN_PROGRESS', retryAfter: '1', late: false });
    },
  );
});
