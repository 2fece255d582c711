import assert from 'node:assert/strict';
import type { IdempotencyStore } from '@idem/core';
import type { Business } from './business.js';
import {
  type Answer,
  type CallInit,
  call,
  leave,
  newKey,
  type ServerContext,
  type ServerOptions,
  type SuiteHarness,
  settled,
  sleep,
} from './support.js';

/** What a cell must leave behind, checked through a retry with the same key and the store itself. */
type Outcome =
  /** The key was released: the retry executes. `runs` counts the handler's runs before the retry. */
  | { readonly kind: 'released'; readonly runs: number }
  /** The answer with `status` was stored: the retry replays it, the handler ran once. */
  | { readonly kind: 'finalized'; readonly status: number; readonly body: string | 'omitted' };

type Fault = 'client abort' | 'handler throw' | 'stream error' | 'hook throw';
type Point =
  | 'before begin resolves'
  | 'during the handler'
  | 'after the status'
  | 'after the first chunk'
  | 'after end';

interface Cell {
  readonly path: string;
  /** The handler run counter of `path` (see Business). */
  readonly counter: string;
  readonly options?: ServerOptions;
  /** How long the server still works on the first request after `send` returns, in ms. */
  readonly busyMs?: number;
  /** Send the first request the way the cell needs (the client leaves, the response breaks …). */
  readonly send: (url: string, path: string, init: CallInit, business: Business) => Promise<unknown>;
  readonly outcome: Outcome;
}

/** A request whose answer may break off: the error is the point of the cell, not a failure. */
const tolerant = (url: string, path: string, init: CallInit) =>
  call(url, path, init).catch((error: unknown) => error);
/** A store whose reserve answers `ms` late: time for the client to leave before begin resolves. */
const slowReserve =
  (ms: number) =>
  (store: IdempotencyStore): IdempotencyStore => ({
    ...store,
    reserve: async (params) => {
      await sleep(ms);
      return store.reserve(params);
    },
  });
const thrower = () => {
  throw new Error('hook failure');
};

/**
 * Every fault at every point of a request's life, each with the one outcome design.md's adapter contract allows, and for every
 * cell: no crash, nothing left in flight, the handler run exactly as often as the outcome says. A cell that
 * cannot happen says why.
 */
const MATRIX: Record<Fault, Record<Point, Cell | string>> = {
  'client abort': {
    'before begin resolves': {
      path: '/slow/10',
      counter: 'slow',
      options: { wrapStore: slowReserve(150) },
      busyMs: 200, // the reservation lands 100 ms after the client left
      send: (url, path, init) => leave(url, path, { ...init, at: 50 }),
      outcome: { kind: 'released', runs: 0 },
    },
    'during the handler': {
      path: '/slow/200',
      counter: 'slow',
      send: (url, path, init, business) => leave(url, path, { ...init, at: business.entered('slow') }),
      outcome: { kind: 'finalized', status: 201, body: '{"slow":200,"run":1}' },
    },
    'after the status': {
      path: '/late/150',
      counter: 'late',
      send: (url, path, init) => leave(url, path, { ...init, at: 'headers' }),
      outcome: { kind: 'finalized', status: 200, body: 'omitted' },
    },
    'after the first chunk': {
      path: '/plan/gap',
      counter: 'plan-gap',
      send: (url, path, init) => leave(url, path, { ...init, at: 'chunk' }),
      outcome: { kind: 'finalized', status: 200, body: 'omitted' },
    },
    // The status line of a one-write answer arrives only after the handler ended the response.
    'after end': {
      path: '/items/1',
      counter: 'items',
      send: (url, path, init) => leave(url, path, { ...init, at: 'headers' }),
      outcome: { kind: 'finalized', status: 201, body: '{"id":"1","body":{"item":"book"},"run":1}' },
    },
  },
  'handler throw': {
    'before begin resolves': 'the handler cannot run before begin resolves (a hook can: see that row)',
    'during the handler': {
      path: '/throw',
      counter: 'throw',
      send: call,
      outcome: { kind: 'released', runs: 1 },
    },
    'after the status': {
      path: '/throw-after/status',
      counter: 'throw-after-status',
      send: tolerant,
      outcome: { kind: 'finalized', status: 200, body: 'omitted' },
    },
    'after the first chunk': {
      path: '/throw-after/chunk',
      counter: 'throw-after-chunk',
      send: tolerant,
      outcome: { kind: 'finalized', status: 200, body: 'omitted' },
    },
    'after end': {
      path: '/throw-after/end',
      counter: 'throw-after-end',
      send: tolerant,
      outcome: { kind: 'finalized', status: 200, body: 'first,end' },
    },
  },
  'stream error': {
    'before begin resolves': 'no response stream exists before the handler runs',
    'during the handler': {
      path: '/plan/fail-first',
      counter: 'plan-fail-first',
      // A 500, or a reset where the app pipes with `pipeline` (which destroys the response on error).
      send: tolerant,
      outcome: { kind: 'released', runs: 1 },
    },
    'after the status': 'a stream sends its status line with its first chunk: see the next cell',
    'after the first chunk': {
      path: '/plan/fail-after-chunk',
      counter: 'plan-fail-after-chunk',
      send: tolerant,
      outcome: { kind: 'finalized', status: 200, body: 'omitted' },
    },
    'after end': 'a stream that ended cannot fail',
  },
  'hook throw': {
    // The scope is the first host hook a request meets; nothing is reserved when it throws.
    'before begin resolves': {
      path: '/items/1',
      counter: 'items',
      options: { scope: thrower } as ServerOptions,
      send: call,
      outcome: { kind: 'released', runs: 0 },
    },
    // Every event listener call happens around the handler; a throwing one must change nothing.
    'during the handler': {
      path: '/items/1',
      counter: 'items',
      options: { onEvent: thrower },
      send: call,
      outcome: { kind: 'finalized', status: 201, body: '{"id":"1","body":{"item":"book"},"run":1}' },
    },
    'after the status': {
      path: '/items/1',
      counter: 'items',
      options: { finalizationRule: thrower },
      send: call,
      // The default rule stands in for the broken one: 201 is stored.
      outcome: { kind: 'finalized', status: 201, body: '{"id":"1","body":{"item":"book"},"run":1}' },
    },
    'after the first chunk': 'no host hook runs between the first chunk and the end',
    'after end': {
      path: '/items/1',
      counter: 'items',
      options: { redact: thrower },
      send: call,
      // What redact was to remove is unknown: only the status is kept.
      outcome: { kind: 'finalized', status: 201, body: 'omitted' },
    },
  },
};

/**
 * The cells that read otherwise for an adapter on Web-standard `Request`/`Response` (Hono, fetch handlers): a
 * handler answers by returning its `Response`, so it cannot throw after its status went out; what fails while
 * the answer is sent is its body stream, the stream error row. The status goes out with the `Response`, before
 * its body.
 */
const WEB_CELLS: Partial<Record<Fault, Partial<Record<Point, Cell | string>>>> = {
  'handler throw': {
    'after the status':
      'a Web handler answers by returning its Response: it cannot throw after the status went out (a body that fails as it is sent is the stream error row)',
    'after the first chunk': 'as after the status: a body that fails after a chunk is the stream error row',
    'after end': 'a handler that returned its Response has ended: nothing of it runs after the end',
  },
  'stream error': {
    'after the status':
      'the status goes out with the Response; a body that fails before its first chunk is the cell before',
  },
};

/** Which request path an adapter is on: Node.js's `ServerResponse`, or Web-standard `Request`/`Response`. */
export type AdapterKind = 'node' | 'web';

async function expectOutcome(context: ServerContext, cell: Cell, key: string, first: unknown): Promise<void> {
  const { url, business, store } = context;
  const record = await settled(store, key);
  const { outcome } = cell;
  if (outcome.kind === 'released') {
    assert.equal(record, undefined, 'the key was released');
    assert.equal(business.calls(cell.counter), outcome.runs, 'handler runs before the retry');
    if (cell.options?.scope !== undefined) {
      assert.equal((first as Answer).status, 500);
      return; // every request of this cell fails the same way
    }
    const retry = await call(url, cell.path, { key }).catch(() => undefined);
    assert.equal(retry?.headers.get('idempotent-replayed') ?? null, null, 'the retry executed');
    assert.equal(business.calls(cell.counter), outcome.runs + 1);
    return;
  }
  assert.equal(record?.response?.status, outcome.status, 'the stored status');
  const retry = await call(url, cell.path, { key });
  assert.equal(retry.status, outcome.status);
  assert.equal(retry.headers.get('idempotent-replayed'), 'true');
  if (outcome.body === 'omitted') {
    assert.equal(retry.headers.get('idempotent-replay-body-omitted'), 'true');
    assert.equal(retry.bytes.length, 0);
  } else {
    assert.equal(retry.bytes.toString(), outcome.body);
  }
  assert.equal(business.calls(cell.counter), 1, 'the handler ran once');
}

/**
 * The lifecycle matrix: {client abort, handler throw, stream error, hook throw} x {before begin resolves,
 * during the handler, after the status, after the first chunk, after end}.
 */
export function lifecycleMatrix(
  harness: SuiteHarness,
  withServer: (options: ServerOptions, body: (context: ServerContext) => Promise<void>) => Promise<void>,
  kind: AdapterKind = 'node',
): void {
  const { describe, test } = harness;
  describe('lifecycle matrix', () => {
    for (const [fault, row] of Object.entries(MATRIX)) {
      const own = kind === 'web' ? WEB_CELLS[fault as Fault] : undefined;
      for (const [point, cell] of Object.entries({ ...row, ...own })) {
        if (typeof cell === 'string') continue; // cannot happen; the reason is in the table
        const verdict =
          cell.outcome.kind === 'released' ? 'released' : `finalized with ${cell.outcome.status}`;
        test(`${fault} ${point}: ${verdict}, no crash, nothing in flight`, () =>
          withServer(cell.options ?? {}, async (context) => {
            const key = newKey();
            const first = await cell.send(context.url, cell.path, { key }, context.business);
            if (cell.busyMs !== undefined) await sleep(cell.busyMs);
            await expectOutcome(context, cell, key, first);
          }));
      }
    }

    test('store fault at finalize: the client still gets its answer, and nothing crashes', () =>
      withServer(
        {
          wrapStore: (store) => ({
            ...store,
            finalize: () => Promise.reject(new Error('store down')),
          }),
        },
        async ({ url, business }) => {
          const answer = await call(url, '/items/1', { key: newKey() });
          assert.equal(answer.status, 201);
          assert.equal(business.calls('items'), 1);
        },
      ));
  });
}
