import {
  describeLosses,
  faultRates,
  freshKeyPerAttempt,
  inPool,
  jsonOrText,
  type LossyProxy,
  startLossyProxy,
} from '@idem/adapter-suite';
import {
  callOutcome,
  createIdempotentFetch,
  type IdempotentFetch,
  type IdempotentFetchOptions,
} from '@idem/client';
import { IcebergRestCatalog } from 'iceberg-js';
import { describe, expect, test } from 'vitest';
import { call, idempotencyRecords, type Node, schema, startNode } from './support/server.js';

const LOSS_RATE = 0.3;
// A run takes seconds; on 2 busy cores, more. Never a hang: the client's bounds end every call.
const RUN_TIMEOUT_MS = 120_000;

/** A catalog on SQLite behind a proxy that loses 30 % of the answers, for one test. */
async function withLossyCatalog(seed: number, body: (node: Node, proxy: LossyProxy) => Promise<void>) {
  const node = await startNode('sqlite::memory:');
  const proxy = await startLossyProxy(node.url, { faults: faultRates(LOSS_RATE), seed });
  try {
    await body(node, proxy);
  } finally {
    await proxy.close();
    await node.close();
  }
}

/** The client as a catalog user would set it up: the key lifetime read from the catalog's /v1/config. */
const clientOf = (proxy: LossyProxy, options: IdempotentFetchOptions = {}) =>
  createIdempotentFetch({
    discoverKeyLifetime: proxy.url,
    // Short waits keep the run fast; attempts are many, so that no call runs out of them at 30 % loss.
    maxAttempts: 30,
    baseDelayMs: 2,
    maxDelayMs: 50,
    ...options,
  });

/** The version in a metadata file's name: `…/00042-<uuid>.metadata.json` → 42, one per commit applied. */
const versionOf = (metadataLocation: string) =>
  Number(/(\d+)-[^/]*\.metadata\.json$/.exec(metadataLocation)?.[1]);

const range = (n: number) => Array.from({ length: n }, (_, i) => i);

interface Answer {
  readonly status: number;
  readonly body: unknown;
  readonly attempts: number;
  readonly replayed: boolean;
}

/** Create namespaces n0…n(calls−1) through the proxy, 32 calls at a time; each caller's answer, by call. */
async function createNamespaces(idempotentFetch: IdempotentFetch, proxy: LossyProxy, calls: number) {
  const answers: Answer[] = [];
  await inPool(range(calls), 32, async (i) => {
    const response = await idempotentFetch(`${proxy.url}/v1/namespaces`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ namespace: [`n${i}`], properties: { call: String(i) } }),
    });
    const outcome = callOutcome(response);
    answers[i] = {
      status: response.status,
      body: jsonOrText(await response.text()),
      attempts: outcome?.attempts ?? 0,
      replayed: outcome?.replayed ?? false,
    };
  });
  return answers;
}

/** The calls whose caller did not get the creation of its own namespace. */
const wrongAnswers = (answers: readonly Answer[]) =>
  range(answers.length).filter((i) => {
    const answer = answers[i];
    const expected = { namespace: [`n${i}`], properties: { call: String(i) } };
    return answer?.status !== 200 || JSON.stringify(answer.body) !== JSON.stringify(expected);
  });

describe('@idem/client against the catalog, through a proxy that loses 30 % of the answers', () => {
  test(
    '1,000 createNamespace calls: each namespace created once, each caller gets its creation answer',
    () =>
      withLossyCatalog(21, async (node, proxy) => {
        const calls = 1000;
        const started = Date.now();
        const answers = await createNamespaces(clientOf(proxy), proxy, calls);
        const elapsedMs = Date.now() - started;
        // A second execution of a call would have answered 409 AlreadyExists, which is final: its caller
        // would hold it. Every caller holds the 200 of its own namespace instead.
        const wrong = wrongAnswers(answers);
        expect(wrong).toEqual([]);
        const listed = (await call(node.url, 'GET', '/v1/namespaces')).json().namespaces as string[][];
        expect(new Set(listed.map((n) => n.join('.'))).size).toBe(calls);
        // One record per call: every attempt of a call carried its one key, and no other key got through.
        expect(await idempotencyRecords(node)).toBe(calls);
        const attempts = answers.reduce((sum, a) => sum + a.attempts, 0);
        const replays = answers.filter((a) => a.replayed).length;
        const duplicates = answers.filter((a) => a.status === 409).length;
        console.info(
          `reference server (SQLite): ${calls} calls, ${attempts} attempts (${(attempts / calls).toFixed(2)} per call), ` +
            `${proxy.lost()} answers lost (${((100 * proxy.lost()) / proxy.stats.requests).toFixed(1)} %, ` +
            `config reads included: ${describeLosses(proxy.stats)}), ${listed.length} namespaces created, ${duplicates} duplicates (AlreadyExists), ` +
            `${calls - listed.length} losses, ` +
            `${wrong.length} wrong answers, ${replays} replays, ${elapsedMs} ms`,
        );
        expect(proxy.stats.droppedAnswers).toBeGreaterThan(0);
        expect(replays).toBeGreaterThan(0);
      }),
    RUN_TIMEOUT_MS,
  );

  test(
    'control: a client that changes its key on every attempt gets AlreadyExists for namespaces it created',
    () =>
      withLossyCatalog(21, async (node, proxy) => {
        const answers = await createNamespaces(clientOf(proxy, { fetch: freshKeyPerAttempt }), proxy, 200);
        expect(wrongAnswers(answers).length).toBeGreaterThan(0);
        expect(answers.some((a) => a.status === 409)).toBe(true);
        expect(await idempotencyRecords(node)).toBeGreaterThan(200);
      }),
    RUN_TIMEOUT_MS,
  );

  test(
    '200 concurrent commits to one table: each applied exactly once (one metadata version each)',
    () =>
      withLossyCatalog(22, async (node, proxy) => {
        const commits = 200;
        await call(node.url, 'POST', '/v1/namespaces', { body: { namespace: ['c'] } });
        const created = (
          await call(node.url, 'POST', '/v1/namespaces/c/tables', { body: { name: 't', schema } })
        ).json();
        const idempotentFetch = clientOf(proxy);
        const statuses: number[] = [];
        await inPool(range(commits), 16, async (i) => {
          const response = await idempotentFetch(`${proxy.url}/v1/namespaces/c/tables/t`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({
              requirements: [],
              updates: [{ action: 'set-properties', updates: { [`p${i}`]: `${i}` } }],
            }),
          });
          statuses[i] = response.status;
          await response.arrayBuffer();
        });
        expect(new Set(statuses)).toEqual(new Set([200]));
        const table = (await call(node.url, 'GET', '/v1/namespaces/c/tables/t')).json();
        for (const i of range(commits)) expect(table.metadata.properties[`p${i}`]).toBe(`${i}`);
        // Every execution writes one metadata version: a commit executed twice would show as one more.
        expect(versionOf(table['metadata-location']) - versionOf(created['metadata-location'])).toBe(commits);
        expect(await idempotencyRecords(node)).toBe(commits);
      }),
    RUN_TIMEOUT_MS,
  );

  test(
    'iceberg-js with fetch: createIdempotentFetch(): every mutation applied once, though 30 % of answers are lost',
    () =>
      withLossyCatalog(23, async (node, proxy) => {
        const catalog = new IcebergRestCatalog({ baseUrl: proxy.url, fetch: clientOf(proxy) });
        const names = range(20).map((i) => `ns${i}`);
        for (const name of names) {
          await catalog.createNamespace({ namespace: [name] }, { properties: { owner: 'test' } });
          const created = await catalog.createTable({ namespace: [name] }, {
            name: 'events',
            schema,
          } as never);
          await catalog.commitTable({ namespace: [name], name: 'events' }, {
            requirements: [{ type: 'assert-table-uuid', uuid: created['table-uuid'] }],
            updates: [{ action: 'set-properties', updates: { committed: 'once' } }],
          } as never);
          expect(await catalog.tableExists({ namespace: [name], name: 'events' })).toBe(true);
        }
        // Checked on the catalog itself, past the proxy.
        const listed = (await call(node.url, 'GET', '/v1/namespaces')).json().namespaces as string[][];
        expect(listed.map((n) => n.join('.')).sort()).toEqual([...names].sort());
        for (const name of names) {
          const table = (await call(node.url, 'GET', `/v1/namespaces/${name}/tables/events`)).json();
          expect(table.metadata.properties.committed).toBe('once');
          expect(table.metadata['metadata-log']).toHaveLength(1); // one commit, not two
        }
        // iceberg-js mints one key per call; the client kept it for every retry: 3 mutations, 3 records each.
        expect(await idempotencyRecords(node)).toBe(names.length * 3);
        expect(proxy.lost()).toBeGreaterThan(10);
      }),
    RUN_TIMEOUT_MS,
  );
});
