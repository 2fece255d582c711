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
 * | POST /stream | writes `streamChunks` one by one, `streamDelayMs` apart, as a stream |
 * | POST /big/:bytes | `big(bytes)` |
 * | POST /binary | `binary()`: all 256 byte values |
 */
export function createBusiness() {
  const calls = new Map<string, number>();
  const count = (name: string) => calls.set(name, (calls.get(name) ?? 0) + 1);
  let nextId = 1;
  return {
    calls: (name: string) => calls.get(name) ?? 0,
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
    stream(): { chunks: string[]; delayMs: number } {
      count('stream');
      return { chunks: ['alpha,', 'beta,', 'gamma'], delayMs: 10 };
    },
    big(bytes: number): AppResponse {
      count('big');
      return {
        status: 200,
        headers: { 'content-type': 'application/octet-stream' },
        body: Buffer.alloc(bytes, 'b'),
      };
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
