import { parseExposition, total } from '@idem/adapter-suite';
import { afterEach, describe, expect, test } from 'vitest';
import { loadConfig } from '../src/config.js';
import { gate, type ObservedNode, startObservedNode } from './support/observed.js';
import { call, newKey, schema } from './support/server.js';

// IDEMPOTENCY_REPLAY_CACHE_ENTRIES: a node keeps completed answers in memory and answers their replays before
// any transaction (the key is reserved in the catalog's transaction, past the store's own cache).

let node: ObservedNode | undefined;
afterEach(async () => {
  await node?.close();
  node = undefined;
});

const cacheCounts = async (url: string) => {
  const samples = parseExposition(await (await fetch(`${url}/metrics`)).text());
  return {
    hits: total(samples, 'idempotency_cache_hits_total'),
    misses: total(samples, 'idempotency_cache_misses_total'),
  };
};

describe.each(['sqlite', 'postgres'] as const)('the replay cache setting (%s)', (on) => {
  const start = (entries: string) => startObservedNode({ IDEMPOTENCY_REPLAY_CACHE_ENTRIES: entries }, on);

  test('a replay is answered from memory: with the store down and commits held, the same answer', async () => {
    node = await start('100');
    const { url, faults } = node;
    const key = newKey();
    const create = (namespace: string) =>
      call(url, 'POST', '/v1/namespaces', { key, body: { namespace: [namespace] } });
    const first = await create('cached');
    expect(first.status).toBe(200);
    // The first replay is found in the database (in the transaction) and kept; the next ones need neither.
    expect((await create('cached')).headers.get('idempotent-replayed')).toBe('true');
    expect(await cacheCounts(url)).toEqual({ hits: 0, misses: 2 });

    faults.storeDown = true;
    const held = gate();
    faults.hold = held.wait;
    try {
      const replay = await create('cached');
      expect(replay.status).toBe(200);
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
      expect(replay.text).toBe(first.text);
      // The key used for another request is refused from memory as well.
      const reused = await create('other');
      expect(reused.status).toBe(400);
      expect(reused.json().error.message).toMatch(/different request/);
    } finally {
      faults.storeDown = false;
      held.open();
      faults.hold = undefined;
    }
    expect(await cacheCounts(url)).toEqual({ hits: 2, misses: 2 });
    // Nothing was made by the refused reuse.
    expect((await call(url, 'HEAD', '/v1/namespaces/other')).status).toBe(404);
  });

  test('a cached create of a table replays the table as it is now, as a replay from the store does', async () => {
    node = await start('100');
    const { url } = node;
    await call(url, 'POST', '/v1/namespaces', { body: { namespace: ['n'] } });
    const key = newKey();
    const create = () => call(url, 'POST', '/v1/namespaces/n/tables', { key, body: { name: 't', schema } });
    expect((await create()).status).toBe(200);
    expect((await create()).headers.get('idempotent-replayed')).toBe('true'); // kept
    const commit = await call(url, 'POST', '/v1/namespaces/n/tables/t', {
      body: { requirements: [], updates: [{ action: 'set-properties', updates: { after: 'create' } }] },
    });
    expect(commit.status).toBe(200);
    const replay = await create();
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(replay.json().metadata.properties).toMatchObject({ after: 'create' });
    expect(replay.json()['metadata-location']).toBe(commit.json()['metadata-location']);
    expect((await cacheCounts(url)).hits).toBe(1);
  });

  test('an answer still in flight is not kept: its duplicate waits for it, then replays', async () => {
    node = await start('100');
    const { url, faults } = node;
    const key = newKey();
    const create = () => call(url, 'POST', '/v1/namespaces', { key, body: { namespace: ['slow'] } });
    const held = gate();
    faults.hold = held.wait;
    const first = create();
    await new Promise((resolve) => setTimeout(resolve, 50));
    const duplicate = create();
    await new Promise((resolve) => setTimeout(resolve, 50));
    held.open();
    faults.hold = undefined;
    const [a, b] = await Promise.all([first, duplicate]);
    expect(a.status).toBe(200);
    expect(b.status).toBe(200);
    expect(b.headers.get('idempotent-replayed')).toBe('true');
    expect(b.text).toBe(a.text);
  });

  test('0 entries (the default) keeps no answers: every replay goes to the database', async () => {
    node = await start('0');
    const { url } = node;
    const key = newKey();
    const create = () => call(url, 'POST', '/v1/namespaces', { key, body: { namespace: ['plain'] } });
    for (let i = 0; i < 3; i++) expect((await create()).status).toBe(200);
    expect(await cacheCounts(url)).toEqual({ hits: 0, misses: 0 });
  });
});

describe('replay cache settings', () => {
  test('defaults: off, 64 MiB when on', () => {
    const { replayCache } = loadConfig({}).idempotency;
    expect(replayCache).toEqual({ maxEntries: 0, maxBytes: 64 * 1024 * 1024 });
  });

  test.each([
    ['IDEMPOTENCY_REPLAY_CACHE_ENTRIES', '-1'],
    ['IDEMPOTENCY_REPLAY_CACHE_ENTRIES', 'lots'],
    ['IDEMPOTENCY_REPLAY_CACHE_MAX_BYTES', '0'],
    ['IDEMPOTENCY_REPLAY_CACHE_MAX_BYTES', '1e6'],
  ])('%s=%s is refused with its name', (name, value) => {
    expect(() => loadConfig({ [name]: value })).toThrow(new RegExp(`${name} must be a whole number`));
  });
});
