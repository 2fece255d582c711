import { Readable } from 'node:stream';
import { text } from 'node:stream/consumers';
import { UNSEEN_BODY } from '@idem/core';
import { keepBody } from '@idem/node-http';
import { describe, expect, test } from 'vitest';

const idem = { headerName: 'idempotency-key', covers: (method: string) => method === 'POST' };
const keyed = { method: 'POST', headers: { 'idempotency-key': 'k', 'content-length': '4' } };

describe('keepBody', () => {
  test.each([
    ['a method that is not covered', { ...keyed, method: 'GET' }],
    ['no key', { method: 'POST', headers: { 'content-length': '4' } }],
    ['no body declared', { method: 'POST', headers: { 'idempotency-key': 'k' } }],
  ])('nothing to keep for %s', (_, request) => {
    expect(keepBody(idem, request, Readable.from([Buffer.from('abcd')]))).toBeUndefined();
  });

  test('the same bytes for the parser; the whole body once it went through, unseen before', async () => {
    const source = new Readable({ read() {} });
    const kept = keepBody(idem, keyed, source);
    expect(kept?.bytes()).toBe(UNSEEN_BODY);
    source.push(Buffer.from('ab'));
    const read = text(kept?.stream ?? source);
    await new Promise((resolve) => setImmediate(resolve));
    expect(kept?.bytes()).toBe(UNSEEN_BODY); // half of it: not the body
    source.push(Buffer.from('cd'));
    source.push(null);
    expect(await read).toBe('abcd');
    expect(kept?.bytes()).toEqual(Buffer.from('abcd'));
  });

  test("the source's receivedEncodedLength, as it counts", () => {
    const source = Object.assign(new Readable({ read() {} }), { receivedEncodedLength: 0 });
    const stream = keepBody(idem, keyed, source)?.stream as Readable & { receivedEncodedLength?: number };
    source.receivedEncodedLength = 17;
    expect(stream.receivedEncodedLength).toBe(17);
  });

  test("a stream read through the tee answers the source's receivedEncodedLength from one shared getter", () => {
    const source = Object.assign(new Readable({ read() {} }), { receivedEncodedLength: 0 });
    source.pause(); // touched: the tee, not the source itself, goes to the parser
    const stream = keepBody(idem, keyed, source)?.stream as Readable & { receivedEncodedLength?: number };
    expect(stream).not.toBe(source);
    source.receivedEncodedLength = 17;
    expect(stream.receivedEncodedLength).toBe(17);
    // Not a getter defined on each stream: its closure made a hidden class per request, kept in the old generation.
    expect(Object.getOwnPropertyDescriptor(stream, 'receivedEncodedLength')).toBeUndefined();
  });

  test("the source's errors reach the parser, and the body stays unseen", async () => {
    const source = new Readable({ read() {} });
    const kept = keepBody(idem, keyed, source);
    const failed = new Promise((resolve) => kept?.stream.on('error', resolve));
    source.destroy(new Error('connection reset'));
    expect(await failed).toMatchObject({ message: 'connection reset' });
    expect(kept?.bytes()).toBe(UNSEEN_BODY);
  });
});

describe('keepBody, where the bytes are taken', () => {
  test('bytes that arrived before the call are read out and put back in front, in order', async () => {
    const source = new Readable({ read() {} });
    source.push(Buffer.from('ab'));
    const kept = keepBody(idem, keyed, source);
    source.push(Buffer.from('cd'));
    source.push(null);
    expect(await text(source)).toBe('abcd');
    expect(kept?.bytes()).toEqual(Buffer.from('abcd'));
  });

  test('bytes before any decoding a reader asks for: invalid UTF-8 stays the bytes it was', async () => {
    const source = new Readable({ read() {} });
    const kept = keepBody(idem, keyed, source);
    source.setEncoding('utf8');
    const invalid = Buffer.from([0x7b, 0xff, 0xfe, 0x7d]);
    source.push(invalid);
    source.push(null);
    expect(await text(source)).toBe('{\ufffd\ufffd}');
    expect(kept?.bytes()).toEqual(invalid);
  });

  test.each([
    ['read from already', (source: Readable) => source.read()],
    ['flowing already', (source: Readable) => source.on('data', () => {})],
    ['decoding already', (source: Readable) => source.setEncoding('utf8')],
  ])('a source %s: read through a tee, the bytes the parser reads from here on', async (_, before) => {
    const source = new Readable({ read() {} });
    source.push(Buffer.from('ab'));
    before(source);
    await new Promise((resolve) => setImmediate(resolve));
    const kept = keepBody(idem, keyed, source);
    expect(kept?.stream).not.toBe(source);
    const read = text(kept?.stream ?? source);
    source.push(Buffer.from('cd'));
    source.push(null);
    const parsed = await read;
    expect(kept?.bytes()).toEqual(Buffer.from(parsed));
  });

  test('the source itself goes to the parser: nothing is put between them', () => {
    const source = new Readable({ read() {} });
    expect(keepBody(idem, keyed, source)?.stream).toBe(source);
  });
});
