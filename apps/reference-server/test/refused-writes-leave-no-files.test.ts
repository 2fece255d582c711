import { readdirSync } from 'node:fs';
import { afterEach, describe, expect, test } from 'vitest';
import { backends, everyDatabase, type FreshDatabase } from './support/databases.js';
import { gate } from './support/gate.js';
import { view } from './support/hostile.js';
import { call, idempotencyRecords, type Node, newKey, schema, startNode } from './support/server.js';

// Changes refused only after the catalog has written their new metadata files (a later table's file that cannot
// be written, a name another create took first): the files they wrote are removed again, and only the catalog's
// own files stay. (Refusals found before any write: refused-creates-leave-no-files.test.ts.)

let node: Node | undefined;
let database: FreshDatabase | undefined;
afterEach(async () => {
  await node?.close();
  await database?.drop();
  node = undefined;
  database = undefined;
});

const metadataFiles = (dir: string) =>
  readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .filter((file) => file.endsWith('.metadata.json'))
    .sort();

describe.each(everyDatabase)('on $name', (backend) => {
  test('a multi-table commit whose second table cannot be written (ENOTDIR): the first table’s new file goes, the refusal is the key’s', async (context) => {
    if (!(await backend.up())) return context.skip();
    database = await backend.fresh();
    node = await startNode(database.url);
    await call(node.url, 'POST', '/v1/namespaces', { body: { namespace: ['n'] } });
    const a = await call(node.url, 'POST', '/v1/namespaces/n/tables', { body: { name: 'a', schema } });
    await call(node.url, 'POST', '/v1/namespaces/n/tables', { body: { name: 'b', schema } });
    // Inside the warehouse, under a file (a's metadata file): past the location guard, then mkdir's ENOTDIR.
    const below = `${a.json()['metadata-location']}/sub`;
    const before = metadataFiles(node.warehouse);
    const key = newKey();
    const commit = {
      'table-changes': [
        {
          identifier: { namespace: ['n'], name: 'a' },
          requirements: [],
          updates: [{ action: 'set-properties', updates: { x: 'y' } }],
        },
        {
          identifier: { namespace: ['n'], name: 'b' },
          requirements: [],
          updates: [{ action: 'set-location', location: below }],
        },
      ],
    };
    const answer = await call(node.url, 'POST', '/v1/transactions/commit', { key, body: commit });
    expect(answer.status, answer.text).toBe(400);
    expect(answer.json().error.type).toBe('BadRequestException');
    expect(metadataFiles(node.warehouse)).toEqual(before);
    // A deterministic refusal: stored, and replayed.
    expect(await idempotencyRecords(node, key)).toBe(1);
    const retry = await call(node.url, 'POST', '/v1/transactions/commit', { key, body: commit });
    expect(retry.status).toBe(400);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(metadataFiles(node.warehouse)).toEqual(before);
  });
});

describe.each(backends)('concurrent creates of one name on $name', (backend) => {
  test.for<[string, object]>([
    ['tables', { name: 'same', schema }],
    ['views', { ...view, name: 'same' }],
  ])(
    'two %s: the one refused (409) once the other committed leaves no file',
    async ([kind, body], context) => {
      if (!(await backend.up())) return context.skip();
      database = await backend.fresh();
      const held = gate();
      node = await startNode(database.url, {}, { beforeCommit: held.pass });
      const { url, warehouse } = node;
      await call(url, 'POST', '/v1/namespaces', { body: { namespace: ['n'] } });
      held.close();
      // The first has written its file and inserted its row; it waits before its COMMIT.
      const first = call(url, 'POST', `/v1/namespaces/n/${kind}`, { key: newKey(), body });
      await held.entered;
      // The second finds the name free (the first's row is not committed), writes its file, and waits on the
      // first's row.
      const second = call(url, 'POST', `/v1/namespaces/n/${kind}`, { key: newKey(), body });
      const until = performance.now() + 5_000;
      while (metadataFiles(warehouse).length < 2 && performance.now() < until)
        await new Promise((resolve) => setTimeout(resolve, 10));
      expect(metadataFiles(warehouse)).toHaveLength(2);
      held.open();
      const [won, lost] = await Promise.all([first, second]);
      expect(won.status, won.text).toBe(200);
      expect(lost.status, lost.text).toBe(409);
      expect(metadataFiles(warehouse)).toEqual([
        expect.stringContaining(won.json()['metadata-location'].split('/').at(-1)),
      ]);
    },
  );
});
