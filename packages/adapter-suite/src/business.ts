/** A response the test app's handlers produce; each framework sends it in its own idiom. */
export interface AppResponse {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: Buffer;
}

export const json = (status: number, value: unknown, headers: Record<string, string> = {}): AppResponse => ({
  status,
  headers: { 'content-type': 'application/json; charset=utf-8', ...headers },
  body: Buffer.from(JSON.stringify(value)),
});

/**
 * The handlers behind the suite's routes, framework-neutral, counting how often each ran. Every test app maps
 * the same routes onto these:
 *
 * | route | handler |
 * |---|---|
 * | POST /orders | `createOrder(body)`: 201, `Location`, a `Set-Cookie` that must never be replayed |
 * | GET /orders | `listOrders()` (not covered) |
 * | POST /status/:code | `status(code)` |
 * | POST /throw | throws |
 * | POST /slow/:ms | `slow(ms)`: waits, then 201 |
 * | POST /big/:bytes | `big(bytes)` |
 * | POST /binary | `binary()`: all 256 byte values |
 * | POST /items/:id | `item(id, body)`: 201 |
 * | POST /late/:ms | `late(ms)`: the status line (200, text/plain) goes out at once, the body `ms` later |
 * | POST /plan/:name | `plan(name)`: a streamed 200 text/plain body, as {@link StreamPlan} says |
 * | POST /throw-after/:point | `throwAfter(point)`: writes up to `point` (status / chunk / end), then throws |
 * | POST /destroy | `destroy()`: the handler destroys the response 10 ms later, before any status |
 * | PUT /files/:id | `upload(id, text)`: the handler reads the body stream itself (no parser sees it); 201 |
 */
/**
 * A streamed body: `chunks` written `gapMs` apart (the first one after `firstMs`), and then, when `failAfter`
 * is set, the stream fails once that many chunks are out.
 */
export interface StreamPlan {
  readonly chunks: readonly string[];
  readonly firstMs: number;
  readonly gapMs: number;
  readonly failAfter?: number;
}

export const STREAM_PLANS = {
  ok: { chunks: ['alpha,', 'beta,', 'gamma'], firstMs: 0, gapMs: 10 },
  /** A long pause after the first chunk: time to leave after it. */
  gap: { chunks: ['alpha,', 'beta,', 'gamma'], firstMs: 0, gapMs: 150 },
  'fail-first': { chunks: ['alpha,'], firstMs: 10, gapMs: 0, failAfter: 0 },
  'fail-after-chunk': { chunks: ['alpha,', 'beta,'], firstMs: 0, gapMs: 30, failAfter: 1 },
} as const satisfies Record<string, StreamPlan>;

export type StreamPlanName = keyof typeof STREAM_PLANS;

/** Where `throwAfter` fails: after the status line went out, after the first chunk, after the end. */
export type ThrowPoint = 'status' | 'chunk' | 'end';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The chunks of a plan as an async iterable (frameworks turn it into their own stream). */
async function* planChunks(plan: StreamPlan): AsyncGenerator<string> {
  await sleep(plan.firstMs);
  for (const [i, chunk] of plan.chunks.entries()) {
    if (i === plan.failAfter) throw new Error('stream failure');
    if (i > 0) await sleep(plan.gapMs);
    yield chunk;
  }
  if (plan.failAfter === plan.chunks.length) throw new Error('stream failure');
}

export function createBusiness() {
  const calls = new Map<string, number>();
  /** Who waits for the next run of a handler (`entered`). */
  const waiting = new Map<string, (() => void)[]>();
  const count = (name: string) => {
    calls.set(name, (calls.get(name) ?? 0) + 1);
    for (const resolve of waiting.get(name) ?? []) resolve();
    waiting.delete(name);
  };
  let nextId = 1;
  return {
    calls: (name: string) => calls.get(name) ?? 0,
    /** Resolves when the handler `name` next starts running: a client can leave *during* it, whatever the load. */
    entered: (name: string) =>
      new Promise<void>((resolve) => waiting.set(name, [...(waiting.get(name) ?? []), resolve])),
    createOrder(body: unknown): AppResponse {
      count('orders');
      const id = nextId++;
      return json(
        201,
        { id, order: body },
        { location: `/orders/${id}`, 'set-cookie': `session=${id}; HttpOnly` },
      );
    },
    listOrders(): AppResponse {
      count('list');
      return json(200, { orders: nextId - 1 });
    },
    status(code: number): AppResponse {
      count(`status-${code}`);
      return json(code, { code, run: calls.get(`status-${code}`) });
    },
    throws(): never {
      count('throw');
      throw new Error('handler failure');
    },
    async slow(ms: number): Promise<AppResponse> {
      count('slow');
      await new Promise((resolve) => setTimeout(resolve, ms));
      return json(201, { slow: ms, run: calls.get('slow') });
    },
    big(bytes: number): AppResponse {
      count('big');
      return {
        status: 200,
        headers: { 'content-type': 'application/octet-stream' },
        body: Buffer.alloc(bytes, 'b'),
      };
    },
    item(id: string, body: unknown): AppResponse {
      count('items');
      return json(201, { id, body, run: calls.get('items') });
    },
    /** The body of `late`, `ms` after the status line. */
    async late(ms: number): Promise<string> {
      count('late');
      await sleep(ms);
      return `late ${ms}`;
    },
    plan(name: string): AsyncIterable<string> {
      count(`plan-${name}`);
      const plan: StreamPlan | undefined = STREAM_PLANS[name as StreamPlanName];
      if (plan === undefined) throw new Error(`no stream plan ${name}`);
      return planChunks(plan);
    },
    /** Count the run of `throwAfter(point)`; the app writes up to the point, then calls `fail()`. */
    throwAfter(point: string): { readonly point: ThrowPoint; fail(): never } {
      count(`throw-after-${point}`);
      return {
        point: point as ThrowPoint,
        fail() {
          throw new Error(`handler failure after the ${point}`);
        },
      };
    },
    /** Count a run of the handler that breaks its response off. */
    destroy(): void {
      count('destroy');
    },
    upload(id: string, text: string): AppResponse {
      count('upload');
      return json(201, { id, stored: text });
    },
    binary(): AppResponse {
      count('binary');
      return {
        status: 200,
        headers: { 'content-type': 'application/octet-stream' },
        body: Buffer.from(Array.from({ length: 256 }, (_, i) => i)),
      };
    },
  };
}

export type Business = ReturnType<typeof createBusiness>;
