import { describe, expect, test } from 'vitest';
import { expectExecute, expectPending, post, setup } from './support/coordinator.js';

// design.md, "Records, scopes and time": a record is keyed by (scope, key), the scope "a string the host
// chooses", so that "one caller can never receive another's response". A scope hook that returns anything else
// would put every such request under one scope: `begin` refuses it (a rejection, as any failure of the host's
// hooks and bodies is) before the store is touched, so no adapter can pass one on.

const notStrings: Record<string, () => unknown> = {
  'a Promise (an async scope hook)': () => Promise.resolve('alice'),
  // biome-ignore lint/suspicious/noThenProperty: a thenable is the case under test
  'a thenable': () => ({ then: (resolve: (value: string) => void) => resolve('alice') }),
  'the principal object instead of its id': () => ({ id: 'alice' }),
  'an array': () => ['alice'],
  'a number (an id that is not a string)': () => 42,
  'a boolean': () => true,
  null: () => null,
  'a symbol': () => Symbol('alice'),
};

const modes = {
  'reserved at begin': {},
  'reserved at begin, waiting duplicates': { inFlight: { strategy: 'wait' } as const },
  'reserved in the host’s transaction': { reserveIn: 'transaction' as const },
  'reserved in the host’s transaction, read first': {
    reserveIn: 'transaction' as const,
    readBeforeTransaction: true,
  },
};

describe('coordinator: a scope that is not a string is refused, the store untouched', () => {
  for (const [mode, options] of Object.entries(modes)) {
    for (const [kind, scope] of Object.entries(notStrings)) {
      test(`${mode}: ${kind}`, async () => {
        const { idem, backend, events } = setup(options);
        const begun = idem.begin(post({ scope: scope() as string }));
        expect(begun).toBeInstanceOf(Promise); // begin never throws: a failure is a rejection
        await expect(begun).rejects.toThrow(TypeError);
        await expect(begun).rejects.toThrow(/scope must be a string/);
        expect(backend.calls).toEqual([]);
        expect(events).toEqual([]);
      });
    }
  }

  test('the message says what was given instead: a Promise, null, or its type', async () => {
    const { idem } = setup();
    await expect(idem.begin(post({ scope: Promise.resolve('a') as never }))).rejects.toThrow(/got a Promise/);
    await expect(idem.begin(post({ scope: null as never }))).rejects.toThrow(/got null$/);
    await expect(idem.begin(post({ scope: { id: 'a' } as never }))).rejects.toThrow(/got object$/);
  });

  test('a string (the empty one too) or no scope at all is a scope; the same key in two scopes is two records', async () => {
    const { idem, backend } = setup();
    expectExecute(await idem.begin(post({ scope: 'alice' })));
    expectExecute(await idem.begin(post({ scope: 'bob' })));
    expectExecute(await idem.begin(post({ scope: '' })));
    expect(backend.records.size).toBe(3);
    // No scope is the empty one: the record of the request above.
    expect((await idem.begin(post({ scope: undefined }))).action).toBe('reject');
    const transactional = setup({ reserveIn: 'transaction' });
    expectPending(await transactional.idem.begin(post({ scope: 'alice' })));
  });

  test('a request the coordinator passes through is not refused for its scope: no key, or a method not covered', async () => {
    const { idem } = setup();
    const scope = Promise.resolve('alice') as never;
    expect(await idem.begin(post({ key: undefined, scope }))).toEqual({
      action: 'proceed',
      reason: 'no-key',
    });
    expect(await idem.begin(post({ method: 'GET', scope }))).toEqual({ action: 'proceed', reason: 'method' });
  });
});
