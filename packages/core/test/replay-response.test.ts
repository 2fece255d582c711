import { toReplayResponse, toStoredResponse } from '@idem/core';
import { describe, expect, test } from 'vitest';

// toReplayResponse copies the stored headers by hand instead of `{ ...headers, name: value }` (a spread with
// names set after it is slow on Node 20): the copy must be what the spread made, odd names included.
describe('toReplayResponse: the stored headers, copied as a spread copies them', () => {
  const stored = (headers: Record<string, string>) => ({ status: 201, headers, body: new Uint8Array([1]) });

  test.each([
    ['none', {}],
    ['a few, in their order', { location: '/orders/1', 'content-type': 'application/json', etag: '"x"' }],
    [
      'names Object.prototype answers',
      { constructor: 'c', tostring: 't', hasownproperty: 'h', valueof: 'v' },
    ],
    [
      'an own __proto__, as JSON.parse makes it',
      JSON.parse('{"__proto__":"p","a":"1"}') as Record<string, string>,
    ],
    ['a replayed marker already there', { 'idempotent-replayed': 'false', a: '1' }],
  ])('%s', (_, headers) => {
    const replay = toReplayResponse(stored(headers));
    const spread = { ...headers, 'idempotent-replayed': 'true' };
    expect(Object.getPrototypeOf(replay.headers)).toBe(Object.prototype);
    expect(Object.entries(replay.headers)).toEqual(Object.entries(spread));
    expect(replay.headers).not.toBe(headers);
    expect(headers['idempotent-replayed']).not.toBe('true'); // the record's own map is left alone
  });

  test('a name Object.prototype answers with a setter (or a frozen one) is defined, not assigned', () => {
    Object.defineProperty(Object.prototype, 'x-trap', {
      set() {
        throw new Error('assigned through the prototype');
      },
      configurable: true,
    });
    try {
      const replay = toReplayResponse(stored({ 'x-trap': 'kept', a: '1' }));
      expect(Object.entries(replay.headers)).toEqual([
        ['x-trap', 'kept'],
        ['a', '1'],
        ['idempotent-replayed', 'true'],
      ]);
    } finally {
      delete (Object.prototype as Record<string, unknown>)['x-trap'];
    }
  });

  test('a body left out is said so, after the stored headers', () => {
    const replay = toReplayResponse({ status: 200, headers: { a: '1' }, body: null, bodyOmitted: true });
    expect(Object.keys(replay.headers)).toEqual([
      'a',
      'idempotent-replayed',
      'idempotent-replay-body-omitted',
    ]);
  });
});

describe('toStoredResponse: every allow-listed name kept as an own header, whatever it is called', () => {
  test('names Object.prototype has (Node hands headers over in a null-prototype object)', () => {
    const captured: Record<string, string> = Object.assign(Object.create(null), {
      ...JSON.parse('{"__proto__":"p"}'),
      constructor: 'c',
      Location: '/orders/1',
    });
    const stored = toStoredResponse(
      { status: 201, headers: captured, body: null },
      { allowHeaders: new Set(['__proto__', 'constructor', 'location']), maxBodyBytes: 1024 },
    );
    expect(Object.getPrototypeOf(stored.headers)).toBe(Object.prototype);
    expect(Object.entries(stored.headers)).toEqual([
      ['__proto__', 'p'],
      ['constructor', 'c'],
      ['location', '/orders/1'],
    ]);
    expect(Object.entries(toReplayResponse(stored).headers)).toEqual([
      ['__proto__', 'p'],
      ['constructor', 'c'],
      ['location', '/orders/1'],
      ['idempotent-replayed', 'true'],
    ]);
  });
});
