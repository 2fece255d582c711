import { parseExposition, total } from '@idem/adapter-suite';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { backends } from './support/databases.js';
import { gate } from './support/gate.js';
import { call, idempotencyRecords, type Node, newKey, schema, startNode } from './support/server.js';
import { type Prepared, STORE_SETTINGS } from './support/store-settings.js';

// The catalog's idempotency, end to end, on every store setting (IDEMPOTENCY_STORE, IDEMPOTENCY_STORE_URL):
// replay, a key reused for another request, a duplicate in flight, two principals, and two nodes where the
// setting lets nodes share keys.

const SETTINGS = {
  AUTH_TOKENS: 'ta=alice,tb=bob',
  IDEMPOTENCY_MAX_WAIT_MS: '1000',
  IDEMPOTENCY_REPLAY_CACHE_ENTRIES: '100',
};
const TOKENS = { alice: 'ta', bob: 'tb' } as const;

type Options = Parameters<typeof call>[3];
const as = (
  node: Node,
  principal: keyof typeof TOKENS,
  method: string,
  path: string,
  options: Options = {},
) => call(node.url, method, path, { ...options, token: TOKENS[principal] });
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const cacheHits = async (node: Node) =>
  total(parseExposition(await (await fetch(`${node.url}/metrics`)).text()), 'idempotency_cache_hits_total');

let suite = 0;

for (const setting of STORE_SETTINGS) {
  describe.runIf(await setting.up())(`idempotency with the store ${setting.name}`, () => {
    let prepared: Prepared;
    let node: Node;
    const held = gate();
    // Namespaces of this suite's own: the settings' suites never meet, whatever database they share.
    const tag = `s${++suite}`;
    const env = () => ({ ...prepared.env, ...SETTINGS });

    beforeAll(async () => {
      prepared = await setting.prepare();
      node = await startNode(prepared.databaseUrl, env(), { beforeCommit: held.pass });
    });
    afterAll(async () => {
      await node?.close();
      await prepared?.drop();
    });

    test('/health names the store and how a key is fenced, never its URL', async () => {
      const response = await fetch(`${node.url}/health`);
      const text = await response.text();
      expect(response.status, text).toBe(200);
      expect(JSON.parse(text).idempotency).toMatchObject({
        store: prepared.env.IDEMPOTENCY_STORE ?? 'sql',
        fence: setting.fence,
      });
      expect(text).not.toMatch(/127\.0\.0\.1|:\/\/|sqlite:|idem-test/);
    });

    test('a retry with the key replays the first answer (idempotent-replayed), the work done once', async () => {
      const key = newKey();
      const body = { namespace: [`${tag}-replay`] };
      const first = await as(node, 'alice', 'POST', '/v1/namespaces', { key, body });
      expect(first.status, first.text).toBe(200);
      expect(first.headers.get('idempotent-replayed')).toBeNull();
      const hitsBefore = await cacheHits(node);
      for (let i = 0; i < 2; i++) {
        // The first replay comes from the store, the second from the replay cache.
        const retry = await as(node, 'alice', 'POST', '/v1/namespaces', { key, body });
        expect(retry.status).toBe(200);
        expect(retry.headers.get('idempotent-replayed')).toBe('true');
        expect(retry.text).toBe(first.text);
      }
      expect(await cacheHits(node)).toBe(hitsBefore + 1);
      // The record is where the setting says: in the catalog's own database, or anywhere but there.
      expect(await idempotencyRecords(node, key)).toBe(setting.fence === 'transaction' ? 1 : 0);
      // Without the key the same create is a new request: the namespace exists.
      expect((await as(node, 'alice', 'POST', '/v1/namespaces', { body })).status).toBe(409);

      const namespace = `${tag}-replay`;
      await as(node, 'alice', 'POST', `/v1/namespaces/${namespace}/tables`, { body: { name: 't', schema } });
      const commit = { requirements: [], updates: [{ action: 'set-properties', updates: { n: '1' } }] };
      const commitKey = newKey();
      const path = `/v1/namespaces/${namespace}/tables/t`;
      const committed = await as(node, 'alice', 'POST', path, { key: commitKey, body: commit });
      const again = await as(node, 'alice', 'POST', path, { key: commitKey, body: commit });
      expect(committed.status, committed.text).toBe(200);
      expect(again.headers.get('idempotent-replayed')).toBe('true');
      expect(again.text).toBe(committed.text);
      const table = (await as(node, 'alice', 'GET', path)).json();
      expect(table.metadata['metadata-log']).toHaveLength(1); // one commit, not two
    });

    test('a replayed create shows the table as it is now (rebuilt from the catalog, outside any transaction with a lease)', async () => {
      const namespace = `${tag}-rebuilt`;
      await as(node, 'alice', 'POST', '/v1/namespaces', { body: { namespace: [namespace] } });
      const key = newKey();
      const request = { name: 'fresh', schema };
      const path = `/v1/namespaces/${namespace}/tables`;
      const createdTable = await as(node, 'alice', 'POST', path, { key, body: request });
      expect(createdTable.status, createdTable.text).toBe(200);
      await as(node, 'alice', 'POST', `${path}/fresh`, {
        body: { requirements: [], updates: [{ action: 'set-properties', updates: { later: 'yes' } }] },
      });
      const replay = await as(node, 'alice', 'POST', path, { key, body: request });
      expect(replay.status).toBe(200);
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
      expect(replay.json().metadata['table-uuid']).toBe(createdTable.json().metadata['table-uuid']);
      expect(replay.json().metadata.properties).toEqual({ later: 'yes' });
      expect(replay.json().config).toEqual({});
    });

    test('the same key with another body: 400 (used for another request), and nothing changed', async () => {
      const key = newKey();
      const first = await as(node, 'alice', 'POST', '/v1/namespaces', {
        key,
        body: { namespace: [`${tag}-a`] },
      });
      expect(first.status).toBe(200);
      const misuse = await as(node, 'alice', 'POST', '/v1/namespaces', {
        key,
        body: { namespace: [`${tag}-b`] },
      });
      expect(misuse.status).toBe(400);
      expect(misuse.headers.get('idempotent-replayed')).toBeNull();
      expect(misuse.json().error).toMatchObject({ type: 'BadRequestException', code: 400 });
      expect(misuse.json().error.message).toMatch(/different request/);
      expect((await as(node, 'alice', 'HEAD', `/v1/namespaces/${tag}-b`)).status).toBe(404);
    });

    test('a duplicate while the first is in flight waits for it, then replays its answer', async () => {
      const key = newKey();
      const body = { namespace: [`${tag}-flight`] };
      held.close();
      const first = as(node, 'alice', 'POST', '/v1/namespaces', { key, body });
      await held.entered; // the first holds its key, its work done, its commit waiting
      const duplicate = as(node, 'alice', 'POST', '/v1/namespaces', { key, body });
      await sleep(150);
      held.open();
      const [a, b] = await Promise.all([first, duplicate]);
      expect(a.status, a.text).toBe(200);
      expect(a.headers.get('idempotent-replayed')).toBeNull();
      expect(b.status, b.text).toBe(200);
      expect(b.headers.get('idempotent-replayed')).toBe('true');
      expect(b.text).toBe(a.text);
    });

    const outwaits =
      setting.inFlight === 'turn'
        ? 'a duplicate waits for the one SQLite connection’s turn, past IDEMPOTENCY_MAX_WAIT_MS, and replays'
        : `a duplicate that waits past IDEMPOTENCY_MAX_WAIT_MS (on the ${setting.inFlight === 'row' ? 'record’s row lock' : 'store, polling'}): 503 with Retry-After; the first completes once`;
    test(outwaits, async () => {
      const key = newKey();
      const body = { namespace: [`${tag}-slow`] };
      held.close();
      const first = as(node, 'alice', 'POST', '/v1/namespaces', { key, body });
      await held.entered;
      const startedMs = performance.now();
      const duplicate = as(node, 'alice', 'POST', '/v1/namespaces', { key, body });
      if (setting.inFlight === 'turn') {
        await sleep(1_300);
        held.open();
        const [a, b] = await Promise.all([first, duplicate]);
        expect(a.status).toBe(200);
        expect(b.status).toBe(200);
        expect(b.headers.get('idempotent-replayed')).toBe('true');
        return;
      }
      const waited = await duplicate;
      const waitedMs = performance.now() - startedMs;
      held.open();
      expect(waited.status, waited.text).toBe(503);
      expect(waited.headers.get('retry-after')).toBeTruthy();
      expect(waitedMs).toBeGreaterThan(900);
      expect(waitedMs).toBeLessThan(3_500);
      expect((await first).status).toBe(200);
      const retry = await as(node, 'alice', 'POST', '/v1/namespaces', { key, body });
      expect(retry.headers.get('idempotent-replayed')).toBe('true');
    });

    test('two principals with one key: two records, neither sees the other’s answer', async () => {
      const key = newKey();
      const alice = await as(node, 'alice', 'POST', '/v1/namespaces', {
        key,
        body: { namespace: [`${tag}-alice`] },
      });
      const bob = await as(node, 'bob', 'POST', '/v1/namespaces', {
        key,
        body: { namespace: [`${tag}-bob`] },
      });
      expect(alice.status).toBe(200);
      expect(bob.status, bob.text).toBe(200); // executed for Bob: not Alice's replay, not a reused key
      expect(bob.headers.get('idempotent-replayed')).toBeNull();
      const bobAgain = await as(node, 'bob', 'POST', '/v1/namespaces', {
        key,
        body: { namespace: [`${tag}-bob`] },
      });
      expect(bobAgain.headers.get('idempotent-replayed')).toBe('true');
      expect(bobAgain.text).toBe(bob.text);
      // The same key and body as Bob's, from Alice: hers is another request.
      const crossed = await as(node, 'alice', 'POST', '/v1/namespaces', {
        key,
        body: { namespace: [`${tag}-bob`] },
      });
      expect(crossed.status).toBe(400);
    });

    if (setting.nodes === 'many')
      test('two nodes: a retry on the other replays, and 20 concurrent creates with one key across both run once', async () => {
        const other = await startNode(prepared.databaseUrl, env());
        try {
          const key = newKey();
          const body = { namespace: [`${tag}-shared`] };
          const first = await as(node, 'alice', 'POST', '/v1/namespaces', { key, body });
          const retry = await as(other, 'alice', 'POST', '/v1/namespaces', { key, body });
          expect(first.status).toBe(200);
          expect(retry.status).toBe(200);
          expect(retry.headers.get('idempotent-replayed')).toBe('true');
          expect(retry.text).toBe(first.text);

          const namespace = `${tag}-race`;
          await as(node, 'alice', 'POST', '/v1/namespaces', { body: { namespace: [namespace] } });
          const raceKey = newKey();
          const answers = await Promise.all(
            Array.from({ length: 20 }, (_, i) =>
              as(i % 2 === 0 ? node : other, 'alice', 'POST', `/v1/namespaces/${namespace}/tables`, {
                key: raceKey,
                body: { name: 'once', schema },
              }),
            ),
          );
          const statuses = answers.map((answer) => answer.status);
          // Each duplicate waits for the first and replays it, or gives up with a retryable 503.
          expect(statuses.filter((s) => s !== 200 && s !== 503)).toEqual([]);
          const executed = answers.filter(
            (answer) => answer.status === 200 && answer.headers.get('idempotent-replayed') === null,
          );
          expect(executed).toHaveLength(1);
          expect(new Set(answers.filter((a) => a.status === 200).map((a) => a.text)).size).toBe(1);
          const tables = (await as(other, 'alice', 'GET', `/v1/namespaces/${namespace}/tables`)).json();
          expect(tables.identifiers).toHaveLength(1);
        } finally {
          await other.close();
        }
      });
  });
}

const [postgres] = backends as [(typeof backends)[number]];

describe.runIf(await postgres.up())('the memory store is one node’s', () => {
  test('so there is no multi-node test for it: on two nodes of one catalog, a retry on the other node runs again', async () => {
    const database = await postgres.fresh();
    const env = { IDEMPOTENCY_STORE: 'memory' };
    const [a, b] = await Promise.all([startNode(database.url, env), startNode(database.url, env)]);
    try {
      const key = newKey();
      const body = { namespace: ['one-node'] };
      expect((await call(a.url, 'POST', '/v1/namespaces', { key, body })).status).toBe(200);
      // Node B never saw the key: it runs the create again, and the catalog refuses it.
      const elsewhere = await call(b.url, 'POST', '/v1/namespaces', { key, body });
      expect(elsewhere.status).toBe(409);
      expect(elsewhere.headers.get('idempotent-replayed')).toBeNull();
      expect(
        (await call(a.url, 'POST', '/v1/namespaces', { key, body })).headers.get('idempotent-replayed'),
      ).toBe('true');
    } finally {
      await a.close();
      await b.close();
      await database.drop();
    }
  });
});
