import { computeFingerprint } from '@idem/core';
import { describe, expect, test } from 'vitest';
import { backends } from './support/databases.js';
import { call, type Node, newKey, schema, startNode } from './support/server.js';

for (const backend of backends) {
  describe.runIf(await backend.up())(`two catalog nodes on one ${backend.name} database`, () => {
    async function withNodes(body: (a: Node, b: Node, url: string) => Promise<void>) {
      const database = await backend.fresh();
      // Both nodes start at once and race to create the schema, as a scaled-out deployment does.
      const [a, b] = await Promise.all([startNode(database.url), startNode(database.url)]);
      try {
        await body(a, b, database.url);
      } finally {
        await a.close();
        await b.close();
        await database.drop();
      }
    }

    test('a retry that lands on the other node replays the first answer', () =>
      withNodes(async (a, b) => {
        const key = newKey();
        const first = await call(a.url, 'POST', '/v1/namespaces', { key, body: { namespace: ['shared'] } });
        const retry = await call(b.url, 'POST', '/v1/namespaces', { key, body: { namespace: ['shared'] } });
        expect(first.status).toBe(200);
        expect(retry.status).toBe(200);
        expect(retry.text).toBe(first.text);
        expect(retry.headers.get('idempotent-replayed')).toBe('true');
      }));

    test('20 concurrent creates with one key across both nodes: one table, every answer the same 200', () =>
      withNodes(async (a, b) => {
        await call(a.url, 'POST', '/v1/namespaces', { body: { namespace: ['race'] } });
        const key = newKey();
        const answers = await Promise.all(
          Array.from({ length: 20 }, (_, i) =>
            call(i % 2 === 0 ? a.url : b.url, 'POST', '/v1/namespaces/race/tables', {
              key,
              body: { name: 'once', schema },
            }),
          ),
        );
        const statuses = answers.map((answer) => answer.status);
        // Each duplicate waits for the first and replays it; none may execute the create a second time.
        expect(statuses.filter((s) => s === 200).length + statuses.filter((s) => s === 503).length).toBe(20);
        const bodies = new Set(
          answers.filter((answer) => answer.status === 200).map((answer) => answer.text),
        );
        expect(bodies.size).toBe(1);
        expect(
          answers.filter(
            (answer) => answer.status === 200 && answer.headers.get('idempotent-replayed') === null,
          ),
        ).toHaveLength(1);
        expect((await call(b.url, 'GET', '/v1/namespaces/race/tables')).json().identifiers).toHaveLength(1);
      }));

    test('a node that died mid-request frees its key after the lease: the retry on the other node executes', () =>
      withNodes(async (a, b) => {
        const key = newKey();
        const body = { namespace: ['crash'] };
        // Node A reserved the key and died before answering: its reservation, with a lease of 300 ms, is all
        // that is left. The fingerprint is the one the coordinator computes for the same request.
        const nowMs = Date.now();
        await a.db.store.reserve({
          scope: '\u001fanonymous',
          key,
          fingerprint: computeFingerprint({
            method: 'POST',
            route: '/v1/namespaces',
            path: '/v1/namespaces',
            body: JSON.stringify(body),
            contentType: 'application/json',
          }),
          owner: 'node-a-that-died',
          nowMs,
          leaseUntilMs: nowMs + 300,
          expiresAtMs: nowMs + 60_000,
        });
        const retry = await call(b.url, 'POST', '/v1/namespaces', { key, body });
        expect(retry.status).toBe(200); // waited for the lease, took the key over, executed
        expect(retry.headers.get('idempotent-replayed')).toBeNull();
        const again = await call(a.url, 'POST', '/v1/namespaces', { key, body });
        expect(again.headers.get('idempotent-replayed')).toBe('true');
      }));

    test('a commit whose reservation was taken over is rolled back: 503, and the work is committed once', () =>
      withNodes(async (a, b) => {
        await call(a.url, 'POST', '/v1/namespaces', { body: { namespace: ['fence'] } });
        await call(a.url, 'POST', '/v1/namespaces/fence/tables', { body: { name: 't', schema } });
        const key = newKey();
        // Node A reserves the key; the reservation is then stolen (as if A's lease lapsed and B took over) by
        // rewriting its owner, so that A's fenced finalize inside its transaction finds it lost.
        const original = a.db.store.reserve.bind(a.db.store);
        a.db.store.reserve = async (params) => {
          const result = await original(params);
          await b.db.store.release({ scope: params.scope, key: params.key, owner: params.owner });
          await b.db.store.reserve({ ...params, owner: 'thief', leaseUntilMs: params.nowMs + 60_000 });
          return result;
        };
        const commit = { requirements: [], updates: [{ action: 'set-properties', updates: { n: '1' } }] };
        const lost = await call(a.url, 'POST', '/v1/namespaces/fence/tables/t', { key, body: commit });
        expect(lost.status).toBe(503);
        expect(lost.headers.get('retry-after')).toBeTruthy();
        const table = (await call(b.url, 'GET', '/v1/namespaces/fence/tables/t')).json();
        expect(table.metadata.properties).toEqual({}); // rolled back: nothing committed
        expect(table.metadata['metadata-log']).toHaveLength(0);
      }));
  });
}
