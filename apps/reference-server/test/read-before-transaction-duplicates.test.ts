import { afterEach, expect, test } from 'vitest';
import { everyDatabase } from './support/databases.js';
import { call, type Node, newKey, schema, startNode } from './support/server.js';

// Concurrent duplicates, each read before its transaction or not (IDEMPOTENCY_READ_BEFORE_TRANSACTION), on
// SQLite's one connection and on a pool of PostgreSQL or MariaDB connections (where an in-flight duplicate
// waits on the record's row): exactly one runs, the others replay its answer, wait (503) or are refused as a
// reused key.

let node: Node | undefined;
let drop: (() => Promise<void>) | undefined;
afterEach(async () => {
  await node?.close();
  node = undefined;
  await drop?.();
  drop = undefined;
});

for (const { name, fresh } of everyDatabase)
  for (const read of ['true', 'false'])
    for (const cache of ['0', '1000'])
      test(`${name} (replay cache ${cache}, read before the transaction: ${read}): 40 concurrent duplicates, some reusing the key for another body: one execution`, async () => {
        const database = await fresh();
        drop = database.drop;
        node = await startNode(database.url, {
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
