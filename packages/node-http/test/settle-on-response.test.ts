import type { ServerResponse } from 'node:http';
import { settleOnResponse } from '@idem/node-http';
import { afterEach, describe, expect, test } from 'vitest';
import { deferred, fakeExecution, type Handler, listen, next, send, sendAndLeave } from './support.js';

let close: (() => Promise<void>) | undefined;
afterEach(async () => {
  await close?.();
  close = undefined;
});

/** A server whose every response is settled on `execution` before `handler` writes it. */
async function serve(fake: ReturnType<typeof fakeExecution>, handler: Handler) {
  const server = await listen((req, res) => {
    settleOnResponse(fake.execution, res);
    return handler(req, res);
  });
  close = server.close;
  return server.port;
}

describe('settleOnResponse', () => {
  test('a response that ends: finish with its status, headers and bytes', async () => {
    const fake = fakeExecution();
    const port = await serve(fake, (_req, res) => {
      res.setHeader('location', '/orders/1');
      res.writeHead(201, { 'Content-Type': 'text/plain' });
      res.write('hel');
      res.end(Buffer.from('lo'));
    });
    const answer = await send(port);
    expect(answer).toMatchObject({ status: 201, body: 'hello' });
    expect(await fake.settled).toBe('finish');
    const [captured] = fake.finished;
    expect(captured).toMatchObject({ status: 201, bodyTruncated: false, contentEncoding: undefined });
    expect(captured?.headers).toMatchObject({ location: '/orders/1', 'content-type': 'text/plain' });
    expect(Buffer.from(captured?.body ?? '').toString()).toBe('hello');
    expect(fake.aborts).toBe(0);
  });

  test('the status as it went out on the status line, even when changed after', async () => {
    const fake = fakeExecution();
    const port = await serve(fake, (_req, res) => {
      res.writeHead(202);
      res.statusCode = 500;
      res.end('ok');
    });
    expect(await send(port)).toMatchObject({ status: 202 });
    await fake.settled;
    expect(fake.finished[0]?.status).toBe(202);
  });

  test('a body over maxBodyBytes: finish with the status and headers, without the body', async () => {
    const fake = fakeExecution(4);
    const port = await serve(fake, (_req, res) => res.end('more than four bytes'));
    expect(await send(port)).toMatchObject({ status: 200, body: 'more than four bytes' });
    await fake.settled;
    expect(fake.finished[0]).toMatchObject({ status: 200, body: null, bodyTruncated: true });
  });

  test('destroyed by the server before any status: abort, the key is released', async () => {
    const fake = fakeExecution();
    const port = await serve(fake, (_req, res) => res.destroy());
    expect(await send(port)).toHaveProperty('error');
    expect(await fake.settled).toBe('abort');
    expect(fake.aborts).toBe(1);
    expect(fake.finished).toEqual([]);
  });

  test('destroyed after the status line, before the end: finish with the status and no body', async () => {
    const fake = fakeExecution();
    const port = await serve(fake, async (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.flushHeaders();
      res.write('first,');
      await new Promise((resolve) => setTimeout(resolve, 20));
      res.destroy();
    });
    await send(port);
    expect(await fake.settled).toBe('finish');
    expect(fake.finished[0]).toMatchObject({ status: 200, body: null, bodyTruncated: true });
    expect(fake.aborts).toBe(0);
  });

  test('destroyed after the end: the finished answer stands, nothing is settled twice', async () => {
    const fake = fakeExecution();
    const port = await serve(fake, (_req, res) => {
      res.end('done');
      res.destroy();
    });
    await send(port);
    expect(await fake.settled).toBe('finish');
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(fake.finished).toHaveLength(1);
    expect(fake.finished[0]).toMatchObject({ status: 200, bodyTruncated: false });
    expect(fake.aborts).toBe(0);
  });

  test('the client leaves before any status: nothing is decided until the handler answers', async () => {
    const fake = fakeExecution();
    const arrived = deferred<ServerResponse>();
    const port = await serve(fake, (_req, res) => arrived.resolve(res));
    sendAndLeave(port, arrived.promise);
    const res = await arrived.promise;
    await next(res, 'close');
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(fake.finished).toEqual([]);
    expect(fake.aborts).toBe(0);
    // The handler answers after all, to nobody: the work is done, and its answer settles the key.
    res.statusCode = 201;
    res.end('late');
    expect(await fake.settled).toBe('finish');
    expect(fake.finished[0]).toMatchObject({ status: 201 });
  });

  test('the Content-Encoding handed to writeHead (in the raw form too) is what the bytes are', async () => {
    const fake = fakeExecution(1024, ['content-encoding', 'x-other']);
    const port = await serve(fake, (_req, res) => {
      res.writeHead(200, ['Content-Encoding', 'br', 'X-Other', '1']);
      res.end('x');
    });
    await send(port);
    await fake.settled;
    expect(fake.finished[0]?.contentEncoding).toBe('br');
    expect(fake.finished[0]?.headers).toMatchObject({ 'content-encoding': 'br', 'x-other': '1' });
  });
});

describe('settleOnResponse: the stored headers read by name, the body copied once', () => {
  const stored = ['content-type', 'location', 'etag', 'x-list', 'x-count'];
  // Each case writes a response; the headers captured must be exactly the stored names that went out.
  const cases: [string, (res: ServerResponse) => void, Record<string, unknown>][] = [
    [
      'set, then a bare head',
      (res) => {
        res.setHeader('Content-Type', 'text/plain');
        res.setHeader('X-Secret', 'no');
        res.end('a');
      },
      { 'content-type': 'text/plain' },
    ],
    [
      'handed to writeHead only (object)',
      (res) => {
        res.writeHead(201, { 'Content-Type': 'a/b', Location: '/x', 'X-Secret': 'no' });
        res.end('a');
      },
      { 'content-type': 'a/b', location: '/x' },
    ],
    [
      'handed to writeHead only (raw array)',
      (res) => {
        res.writeHead(201, ['ETag', '"1"', 'X-Secret', 'no']);
        res.end('a');
      },
      { etag: '"1"' },
    ],
    [
      'set, then replaced by writeHead',
      (res) => {
        res.setHeader('Content-Type', 'old/type');
        res.writeHead(200, { 'content-type': 'new/type' });
        res.end('a');
      },
      { 'content-type': 'new/type' },
    ],
    [
      'an array and a number',
      (res) => {
        res.setHeader('X-List', ['1', '2']);
        res.setHeader('X-Count', 3);
        res.end('a');
      },
      { 'x-list': ['1', '2'], 'x-count': 3 },
    ],
    [
      'set, then removed',
      (res) => {
        res.setHeader('Location', '/gone');
        res.removeHeader('location');
        res.end('a');
      },
      {},
    ],
  ];
  // Heads that go straight out (nothing set before): Node writes a line for each value.
  cases.push(
    [
      'a name twice in the raw form, nothing set before',
      (res) => {
        res.writeHead(200, ['Link', '<a>', 'Link', '<b>']);
        res.end('a');
      },
      { link: ['<a>', '<b>'] },
    ],
    [
      'an array value in the raw form',
      (res) => {
        res.writeHead(200, ['Link', ['<a>', '<b>'] as unknown as string]);
        res.end('a');
      },
      { link: ['<a>', '<b>'] },
    ],
    [
      'one name in two cases',
      (res) => {
        res.writeHead(200, { Link: '<a>', link: '<b>' });
        res.end('a');
      },
      { link: ['<a>', '<b>'] },
    ],
    // Node sends a null as "null" (core stores it as that text).
    [
      'a header set to null',
      (res) => {
        res.setHeader('Location', null as unknown as string);
        res.end('a');
      },
      { location: null },
    ],
    // A name Object.prototype answers is a header or nothing, whichever way the head was written.
    [
      'constructor, never set',
      (res) => {
        res.writeHead(200, { 'Content-Type': 'a/b' });
        res.end('a');
      },
      { 'content-type': 'a/b' },
    ],
    [
      'constructor, never set, a bare head',
      (res) => {
        res.end('a');
      },
      {},
    ],
    [
      'constructor, set',
      (res) => {
        res.setHeader('Constructor', 'yes');
        res.end('a');
      },
      { constructor: 'yes' },
    ],
    [
      'constructor, handed to writeHead',
      (res) => {
        res.writeHead(200, ['Constructor', 'yes']);
        res.end('a');
      },
      { constructor: 'yes' },
    ],
  );
  test.each(cases)('%s', async (_name, write, expected) => {
    const fake = fakeExecution(1024, [...stored, 'link', 'constructor']);
    const port = await serve(fake, (_req, res) => write(res));
    await send(port);
    expect(await fake.settled).toBe('finish');
    expect({ ...fake.finished[0]?.headers }).toEqual(expected);
  });

  test("a body ended with the app's own bytes is a copy: the app reusing them changes nothing stored", async () => {
    const fake = fakeExecution();
    const bytes = Buffer.from('hello');
    const port = await serve(fake, (_req, res) => {
      res.end(bytes);
      bytes.fill(0x21);
    });
    await send(port);
    await fake.settled;
    expect(Buffer.from(fake.finished[0]?.body ?? '').toString()).toBe('hello');
  });

  test('a body written as one string, as several pieces, and as a string then bytes', async () => {
    for (const pieces of [['hello'], ['he', 'llo'], ['he', Buffer.from('llo')], [Buffer.from('he'), 'llo']]) {
      const fake = fakeExecution();
      const port = await serve(fake, (_req, res) => {
        for (const piece of pieces.slice(0, -1)) res.write(piece);
        res.end(pieces.at(-1));
      });
      await send(port);
      await fake.settled;
      expect(Buffer.from(fake.finished[0]?.body ?? '').toString()).toBe('hello');
    }
  });
});
