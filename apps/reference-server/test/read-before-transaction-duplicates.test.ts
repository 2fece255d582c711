import { afterEach, expect, test } from 'vitest';
import { call, type Node, newKey, schema, startNode } from './support/server.js';

// Concurrent duplicates on SQLite's one connection, each read before its transaction or not
// (IDEMPOTENCY_READ_BEFORE_TRANSACTION): exactly one runs, the others replay its answer, wait (503) or are refused
// as a reused key.

let node: Node | undefined;
afterEach(async () => {
  await node?.close();
  node = undefined;
});

for (const read of ['true', 'false'])
  for (const cache of ['0', '1000'])
    test(`SQLite (replay cache ${cache}, read before the transaction: ${read}): 40 concurrent duplicates, some reusing the key for another body: one execution`, async () => {
      node = await startNode('sqlite::memory:', {
        IDEMPOTENCY_REPLAY_CACHE_ENTRIES: cache,
        IDEMPOTENCY_READ_BEFORE_TRANSACTION: read,
      });
      const { url } = node;
      await call(url, 'POST', '/v1/namespaces', { body: { namespace: ['race'] } });
      for (let round = 0; round < 3; round++) {
        const key = newKey();
        const answers = await Promise.all(
          Array.from({ length: 40 }, (_, i) =>
            call(url, 'POST', '/v1/namespaces/race/tables', {
              key,
              body: { name: i % 7 === 3 ? `other${round}` : `once${round}`, schema },
            }),
          ),
        );
        const executed = answers.filter(
          (a) => a.status === 200 && a.headers.get('idempotent-replayed') === null,
        );
        expect(executed).toHaveLength(1);
        const ok = new Set(
          answers.filter((a) => a.status === 200).map((a) => JSON.parse(a.text)['metadata-location']),
        );
        expect(ok.size).toBe(1);
        for (const a of answers) expect([200, 400, 503], a.text).toContain(a.status);
      }
      const tables = (await call(node.url, 'GET', '/v1/namespaces/race/tables')).json().identifiers;
      expect(tables).toHaveLength(3);
    });
