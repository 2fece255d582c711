import { PassThrough, Readable } from 'node:stream';
import { createIdempotency, UNSEEN_BODY } from '@idem/core';
import { KeptBodies } from '@idem/node-http';
import { createMemoryStore } from '@idem/store-memory';
import { expect, test } from 'vitest';

const idem = createIdempotency({ store: createMemoryStore({ sweepIntervalMs: false }) });
const keyed = (contentType: string) => ({
  method: 'POST',
  headers: { 'idempotency-key': 'k', 'content-type': contentType, 'content-length': '7' },
});

test('a parser’s text is the body; without a parser’s text, the parsed body', () => {
  const bodies = new KeptBodies<object>();
  const request = keyed('application/json');
  expect(bodies.of(request, { parsed: true })).toEqual({ parsed: true });
  expect(bodies.text(request, '{"a":1}')).toBe('{"a":1}');
  expect(bodies.of(request, { a: 1 })).toBe('{"a":1}');
});

test('JSON whose parser keeps its text is not teed; any other type is, until read whole', async () => {
  const bodies = new KeptBodies<object>();
  bodies.keepText();
  const json = keyed('application/json; charset=utf-8');
  const source = Readable.from([Buffer.from('{"a":1}')]);
  expect(bodies.tee(idem, json, source)).toBe(source);
  const form = keyed('application/x-www-form-urlencoded');
  const upload = new PassThrough();
  const teed = bodies.tee(idem, form, upload);
  expect(teed).not.toBe(upload);
  expect(bodies.of(form, undefined)).toBe(UNSEEN_BODY); // nothing read yet
  upload.end('a=1&b=2');
  for await (const _ of teed) {
    // the parser reads it
  }
  expect(Buffer.from(bodies.of(form, undefined) as Buffer).toString()).toBe('a=1&b=2');
});

test('an unkeyed request is never teed', () => {
  const bodies = new KeptBodies<object>();
  const source = new PassThrough();
  expect(bodies.tee(idem, { method: 'POST', headers: { 'content-length': '3' } }, source)).toBe(source);
});
