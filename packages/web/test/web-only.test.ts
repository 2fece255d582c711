import { readdirSync, readFileSync } from 'node:fs';
import { createMemoryStore } from '@idem/store-memory';
import { executionOf, withIdempotency } from '@idem/web';
import { v7 } from 'uuid';
import { describe, expect, test } from 'vitest';

// The wrapper runs wherever Request and Response do: driven here with Node's own Web APIs and no server, as a
// Worker, Deno or Bun would call it, and importing nothing of Node's.

const post = (key: string | undefined, body: string, init: RequestInit = {}) =>
  new Request('https://api.example/orders?src=test', {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(key === undefined ? {} : { 'idempotency-key': key }) },
    body,
    ...init,
  });

describe('@idem/web on Web APIs only', () => {
  test('its sources import @idem/core and each other, never a node: module', () => {
    const dir = new URL('../src/', import.meta.url);
    for (const file of readdirSync(dir)) {
      const source = readFileSync(new URL(file, dir), 'utf8');
      for (const [, from] of source.matchAll(/from '([^']+)'/g))
        expect(from, `${file} imports ${from}`).toMatch(/^(@idem\/core|\.\/[\w-]+\.js)$/);
    }
  });

  test('a handler of (request, context): runs once, replays, refuses another body, and reads its body', async () => {
    let runs = 0;
    const keys: (string | undefined)[] = [];
    const handler = withIdempotency(
      async (request: Request, context: { params: { shop: string } }) => {
        runs++;
        const order = (await request.json()) as { item: string };
        keys.push(executionOf(request)?.key);
        return Response.json({ id: runs, item: order.item, shop: context.params.shop }, { status: 201 });
      },
      { store: createMemoryStore(), route: '/orders' },
    );
    const key = v7();
    const context = { params: { shop: 'north' } };
    const first = await handler(post(key, '{"item":"book"}'), context);
    expect(first.status).toBe(201);
    const text = await first.text();
    expect(JSON.parse(text)).toEqual({ id: 1, item: 'book', shop: 'north' });
    const retry = await handler(post(key, '{ "item" : "book" }'), context);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(await retry.text()).toBe(text);
    const reused = await handler(post(key, '{"item":"pen"}'), context);
    expect(reused.status).toBe(422);
    expect(((await reused.json()) as { error: { code: string } }).error.code).toBe('IDEMPOTENCY_KEY_REUSED');
    const plain = await handler(post(undefined, '{"item":"cup"}'), context);
    expect(plain.status).toBe(201);
    expect(runs).toBe(2);
    expect(keys).toEqual([key, undefined]); // the execution, inside the handler, when there is one
  });

  test('a streamed answer is passed through as it is read and stored whole', async () => {
    const store = createMemoryStore();
    let runs = 0;
    const handler = withIdempotency(
      () => {
        runs++;
        const chunks = ['a,', 'b,', 'c'].map((chunk) => new TextEncoder().encode(chunk));
        return new Response(ReadableStream.from(chunks), { headers: { 'content-type': 'text/plain' } });
      },
      { store },
    );
    const key = v7();
    expect(await (await handler(post(key, '{}'))).text()).toBe('a,b,c');
    await new Promise((resolve) => setTimeout(resolve, 10));
    const retry = await handler(post(key, '{}'));
    expect(await retry.text()).toBe('a,b,c');
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(runs).toBe(1);
  });

  test('a request whose client left before the key was reserved runs nothing and leaves nothing', async () => {
    const store = createMemoryStore();
    let runs = 0;
    const handler = withIdempotency(
      () => {
        runs++;
        return new Response('ran');
      },
      { store },
    );
    const controller = new AbortController();
    controller.abort();
    const key = v7();
    await handler(post(key, '{}', { signal: controller.signal }));
    expect(runs).toBe(0);
    expect(await store.load({ scope: '', key })).toBeUndefined();
  });

  test('a handler that throws releases the key, and the error is the caller’s', async () => {
    const store = createMemoryStore();
    const handler = withIdempotency(
      () => {
        throw new Error('handler failure');
      },
      { store },
    );
    const key = v7();
    await expect(handler(post(key, '{}'))).rejects.toThrow('handler failure');
    expect(await store.load({ scope: '', key })).toBeUndefined();
  });
});
