import { IncomingMessage, ServerResponse } from 'node:http';
import { Socket } from 'node:net';
import { createIdempotency, ErrorCode } from '@idem/core';
import { declaresBody, describeRequest } from '@idem/node-http';
import { createMemoryStore } from '@idem/store-memory';
import { afterEach, describe, expect, test } from 'vitest';
import { listen, newKey, send } from './support.js';

let close: (() => Promise<void>) | undefined;
afterEach(async () => {
  await close?.();
  close = undefined;
});

const idem = { headerName: 'idempotency-key', waits: false };
const detachedResponse = () => new ServerResponse(new IncomingMessage(new Socket()));
const parts = (url: string, headers: Record<string, string> = {}) => ({
  method: 'POST',
  url,
  headers,
  route: '/orders/:id',
  body: { n: 1 },
  scope: 'tenant-1',
  host: { id: 'the framework request' },
});

describe('describeRequest', () => {
  test.each([
    ['/orders/1', '/orders/1', undefined],
    ['/orders/1?a=1&b=2', '/orders/1', 'a=1&b=2'],
    ['/orders/1?', '/orders/1', ''],
    ['/orders/1?a=?&b', '/orders/1', 'a=?&b'],
  ])('%s: the path %s and the raw query %s', (url, path, query) => {
    const request = describeRequest(idem, detachedResponse(), parts(url));
    expect(request.path).toBe(path);
    expect(request.query).toBe(query);
  });

  test('the method, route, body, scope and host as given; the content type and key from the headers', () => {
    const headers = { 'content-type': 'application/json', 'idempotency-key': 'k-1', 'x-key': 'other' };
    const request = describeRequest(idem, detachedResponse(), parts('/orders/1', headers));
    expect(request).toMatchObject({
      method: 'POST',
      route: '/orders/:id',
      body: { n: 1 },
      scope: 'tenant-1',
      host: { id: 'the framework request' },
      contentType: 'application/json',
      key: 'k-1',
    });
    const custom = describeRequest({ ...idem, headerName: 'x-key' }, detachedResponse(), parts('/', headers));
    expect(custom.key).toBe('other');
    expect(describeRequest(idem, detachedResponse(), parts('/')).key).toBeUndefined();
  });

  test('a signal only for a coordinator that waits, created when read', () => {
    expect(describeRequest(idem, detachedResponse(), parts('/')).signal).toBeUndefined();
    const request = describeRequest({ ...idem, waits: true }, detachedResponse(), parts('/'));
    expect(request.signal).toBeInstanceOf(AbortSignal);
    expect(request.signal?.aborted).toBe(false);
  });

  // A getter defined on each described request (its own closure) gave each one a hidden class of its own in
  // the old generation, which kept the whole request alive past every young-generation collection.
  test('no described request has a getter of its own: one signal getter serves them all', () => {
    const waiting = { ...idem, waits: true };
    const a = describeRequest(waiting, detachedResponse(), parts('/a'));
    const b = describeRequest(waiting, detachedResponse(), parts('/b'));
    for (const request of [a, b, describeRequest(idem, detachedResponse(), parts('/c'))]) {
      const accessors = Object.entries(Object.getOwnPropertyDescriptors(request)).filter(
        ([, descriptor]) => descriptor.get !== undefined || descriptor.set !== undefined,
      );
      expect(accessors).toEqual([]);
    }
    expect(Object.getPrototypeOf(a)).toBe(Object.getPrototypeOf(b));
    expect(a.signal).not.toBe(b.signal);
    // The getter keeps working on a wrapper, and a copy passes the signal on only when told to.
    expect(new Proxy(a, {}).signal).toBeInstanceOf(AbortSignal);
    expect({ ...a, signal: a.signal }.signal).toBeInstanceOf(AbortSignal);
  });

  test('a repeated key header arrives joined with ", " and begin rejects it before the store', async () => {
    const store = createMemoryStore();
    const coordinator = createIdempotency({ store, keyFormat: 'token' });
    const [first, second] = [newKey(), newKey()];
    let seen: unknown;
    const server = await listen(async (req, res) => {
      const url = req.url ?? '/';
      const request = describeRequest(coordinator, res, { ...parts(url, {}), headers: req.headers });
      seen = request.key;
      const result = await coordinator.begin(request);
      res.end(result.action === 'reject' ? result.error.code : result.action);
    });
    close = server.close;
    const answer = await send(server.port, { headers: { 'idempotency-key': [first, second] } });
    expect(answer).toMatchObject({ body: ErrorCode.KeyInvalid });
    expect(seen).toBe(`${first}, ${second}`);
    expect(await store.load({ scope: 'tenant-1', key: first })).toBeUndefined();
    await store.close();
  });
});

describe('declaresBody', () => {
  test.each([
    [{}, false],
    [{ 'content-length': '0' }, false],
    [{ 'content-length': '12' }, true],
    [{ 'content-length': 'abc' }, false],
    [{ 'transfer-encoding': 'chunked' }, true],
    [{ 'transfer-encoding': 'chunked', 'content-length': '0' }, true],
  ])('%o: %s', (headers, declared) => {
    expect(declaresBody(headers)).toBe(declared);
  });
});
