import { Readable } from 'node:stream';
import { text } from 'node:stream/consumers';
import { UNSEEN_BODY } from '@idem/core';
import { keepBody } from '@idem/node-http';
import { describe, expect, test } from 'vitest';

// Review of keepBody: the bytes buffered in the stream before the call are taken with one read().

const idem = { headerName: 'idempotency-key', covers: (method: string) => method === 'POST' };
const keyed = { method: 'POST', headers: { 'idempotency-key': 'k', 'content-length': '4' } };

describe('keepBody: bytes buffered before the call', () => {
  test('an object-mode stream (a preParsing hook that hands on a stream of its own) with two chunks buffered: both are kept', async () => {
    const source = new Readable({ objectMode: true, read() {} });
    source.push(Buffer.from('ab'));
    source.push(Buffer.from('cd'));
    source.push(null);
    const kept = keepBody(idem, keyed, source);
    const chunks: Buffer[] = [];
    for await (const chunk of kept?.stream ?? source) chunks.push(chunk as Buffer);
    expect(Buffer.concat(chunks).toString()).toBe('abcd'); // what the parser read
    const bytes = kept?.bytes();
    // Either the whole body or unseen; never the first chunk alone as if it were the body.
    expect(bytes === UNSEEN_BODY || Buffer.from(bytes as Buffer).toString() === 'abcd').toBe(true);
  });

  test('a stream whose bytes were decoded (setEncoding) with half a character still in its decoder: never a body without that byte', async () => {
    const source = new Readable({ read() {} });
    source.setEncoding('utf8');
    source.push(Buffer.from([0x7b, 0xc3])); // "{" and the first byte of é
    const kept = keepBody(idem, keyed, source);
    source.push(Buffer.from([0xa9, 0x7d])); // the second byte of é and "}"
    source.push(null);
    expect(await text(kept?.stream ?? source)).toBe('{é}');
    const bytes = kept?.bytes();
    expect(bytes === UNSEEN_BODY || Buffer.from(bytes as Buffer).equals(Buffer.from('{é}'))).toBe(true);
  });
});
