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

    test('a transaction that dies with its key: the duplicate waiting on it executes once it is gone', () =>
      withNodes(async (a, b) => {
        const key = newKey();
        const body = { namespace: ['crash'] };
        const fingerprint = computeFingerprint({
          method: 'POST',
          route: '/v1/namespaces',
          path: '/v1/namespaces',
          body: JSON.stringify(body),
          contentType: 'application/json',
        });
        // Node A reserves the key in a transaction and dies before committing: the database rolls the
        // reservation back with the rest. Node B's request with the key waits on its row meanwhile.
        let aborted = false;
        const dying = a.db
          .transaction(async (tx) => {
            const nowMs = Date.now();
            await tx.idempotency.reserve({
              scope: '\u001fanonymous',
              key,
              fingerprint,
              owner: 'node-a-that-died',
              nowMs,
              leaseUntilMs: nowMs + 30_000,
              expiresAtMs: nowMs + 60_000,
            });
            await new Promise((resolve) => setTimeout(resolve, 300));
            aborted = true;
            throw new Error('node A is gone');
          })
          .catch(() => undefined);
        await new Promise((resolve) => setTimeout(resolve, 50));
        const retry = await call(b.url, 'POST', '/v1/namespaces', { key, body });
        await dying;
        expect(aborted).toBe(true);
        expect(retry.status).toBe(200); // waited on the row, then executed
        expect(retry.headers.get('idempotent-replayed')).toBeNull();
        const again = await call(a.url, 'POST', '/v1/namespaces', { key, body });
        expect(again.headers.get('idempotent-replayed')).toBe('true');
      }));

    test('a key held in flight by a reservation outside any transaction: 503 with Retry-After until its lease lapses', () =>
      withNodes(async (a, b) => {
        const key = newKey();
        const body = { namespace: ['held'] };
        const nowMs = Date.now();
        // As a node that reserves at begin (reserveIn 'begin') and died would leave it.
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
          owner: 'node-that-died',
          nowMs,
          leaseUntilMs: nowMs + 400,
          expiresAtMs: nowMs + 60_000,
        });
        const early = await call(b.url, 'POST', '/v1/namespaces', { key, body });
        expect(early.status).toBe(503);
        expect(early.headers.get('retry-after')).toBeTruthy();
        await new Promise((resolve) => setTimeout(resolve, 450));
        const later = await call(b.url, 'POST', '/v1/namespaces', { key, body });
        expect(later.status).toBe(200); // the lease lapsed: taken over, executed
        expect((await call(a.url, 'GET', '/v1/namespaces/held')).status).toBe(200);
      }));
  });
}
