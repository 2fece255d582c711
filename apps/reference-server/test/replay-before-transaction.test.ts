import { afterEach, describe, expect, test } from 'vitest';
import { loadConfig } from '../src/config.js';
import { gate, type ObservedNode, startObservedNode } from './support/observed.js';
import { call, newKey } from './support/server.js';

// With IDEMPOTENCY_READ_BEFORE_TRANSACTION, a retry of a keyed mutation is answered by one read of its record
// before any transaction (the coordinator's readBeforeTransaction): no transaction opens, so none waits to
// commit. On SQLite the read waits its turn while another request's transaction is open on the process's one
// connection.

const READ_FIRST = { IDEMPOTENCY_READ_BEFORE_TRANSACTION: 'true' };
let node: ObservedNode | undefined;
afterEach(async () => {
  await node?.close();
  node = undefined;
});

describe.each(['sqlite', 'postgres'] as const)('a retry answered before any transaction (%s)', (on) => {
  test('with every commit held, a replay and a reused key are still answered', async () => {
    node = await startObservedNode(READ_FIRST, on);
    const { url, faults } = node;
    const key = newKey();
    const create = (namespace: string) =>
      call(url, 'POST', '/v1/namespaces', { key, body: { namespace: [namespace] } });
    const first = await create('first');
    expect(first.status, first.text).toBe(200);
    const held = gate();
    faults.hold = held.wait; // a transaction would wait here before its commit
    try {
      const replay = await create('first');
      expect(replay.status, replay.text).toBe(200);
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
      expect(replay.text).toBe(first.text);
      const reused = await create('second');
      expect(reused.status).toBe(400);
      expect(reused.json().error.message).toMatch(/different request/);
    } finally {
      held.open();
      faults.hold = undefined;
    }
    expect((await call(url, 'HEAD', '/v1/namespaces/second')).status).toBe(404);
  });

  test('a retry of a key whose request is still running waits for it, then replays its answer', async () => {
    node = await startObservedNode(READ_FIRST, on);
    const { url, faults } = node;
    const key = newKey();
    const create = () => call(url, 'POST', '/v1/namespaces', { key, body: { namespace: ['running'] } });
    const held = gate();
    faults.hold = held.wait;
    const first = create();
    await new Promise((resolve) => setTimeout(resolve, 100));
    // Nothing committed yet: the read finds no answer (on SQLite it waits for the open transaction's turn),
    // and the retry goes to the transaction, which waits on the first one's key.
    const retry = create();
    const settled = await Promise.race([retry.then(() => 'answered'), sleep(200).then(() => 'waiting')]);
    expect(settled).toBe('waiting');
    held.open();
    faults.hold = undefined;
    const [answered, replayed] = await Promise.all([first, retry]);
    expect(answered.status, answered.text).toBe(200);
    expect(replayed.status, replayed.text).toBe(200);
    expect(replayed.headers.get('idempotent-replayed')).toBe('true');
    expect(replayed.text).toBe(answered.text);
  });
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * A create, then its retry while every commit is held: `whileHeld` runs with the retry under way, then the hold is
 * lifted, and the retry must be the first create's answer, replayed.
 */
async function retryWhileHeld(
  env: Record<string, string>,
  on: 'sqlite' | 'postgres',
  whileHeld: (retry: ReturnType<typeof call>) => Promise<void>,
) {
  node = await startObservedNode(env, on);
  const { url, faults } = node;
  const key = newKey();
  const create = () => call(url, 'POST', '/v1/namespaces', { key, body: { namespace: ['held'] } });
  const first = await create();
  expect(first.status, first.text).toBe(200);
  const held = gate();
  faults.hold = held.wait;
  const retry = create();
  try {
    await whileHeld(retry);
  } finally {
    held.open();
    faults.hold = undefined;
  }
  const replayed = await retry;
  expect(replayed.status, replayed.text).toBe(200);
  expect(replayed.headers.get('idempotent-replayed')).toBe('true');
  expect(replayed.text).toBe(first.text);
}

// IDEMPOTENCY_READ_BEFORE_TRANSACTION unset: on SQLite the read comes first (a retry is answered while every
// commit is held); on PostgreSQL it does not (the retry goes to the transaction and waits there for its
// commit).
describe.each([
  ['sqlite', true],
  ['postgres', false],
] as const)('by default (%s): the read before the transaction is %s', (on, readFirst) => {
  test('a retry while every commit is held', async () => {
    await retryWhileHeld({}, on, async (retry) => {
      const settled = await Promise.race([retry.then(() => 'answered'), sleep(300).then(() => 'waiting')]);
      expect(settled).toBe(readFirst ? 'answered' : 'waiting');
    });
  });
});

// Without the read, a retry finds the answer inside its own transaction, and the coordinator reports it
// `replayed` there. That transaction only read an answer another one committed: when it cannot end in time
// (held past the request's deadline here), the retry still gets the replay, never a 503 the event would belie.
describe.each(['sqlite', 'postgres'] as const)(
  'a replay found in a transaction that cannot commit in time (%s)',
  (on) => {
    test('is sent all the same', async () => {
      const env = { IDEMPOTENCY_READ_BEFORE_TRANSACTION: 'false', REQUEST_TIMEOUT_MS: '1000' };
      // Past the retry's deadline: its transaction can no longer commit.
      await retryWhileHeld(env, on, async () => {
        await sleep(1_300);
      });
    });
  },
);

test('IDEMPOTENCY_READ_BEFORE_TRANSACTION: unset or empty leaves it to the database; set, it is the setting', () => {
  const read = (value?: string) =>
    loadConfig(value === undefined ? {} : { IDEMPOTENCY_READ_BEFORE_TRANSACTION: value }).idempotency
      .readBeforeTransaction;
  expect(read()).toBeUndefined();
  expect(read('')).toBeUndefined();
  for (const on of ['true', '1', 'yes', 'ON']) expect(read(on)).toBe(true);
  for (const off of ['false', '0', 'no', 'off']) expect(read(off)).toBe(false);
});
