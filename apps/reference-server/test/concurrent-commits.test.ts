import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, test } from 'vitest';
import { backends } from './support/databases.js';
import { call, type Node, schema, startNode } from './support/server.js';

/** Where the catalog runs: SQLite in memory, and two nodes on each server database. */
const setups = [
  {
    name: 'SQLite',
    up: async () => true,
    start: async () => {
      const node = await startNode('sqlite::memory:');
      return { nodes: [node], close: () => node.close() };
    },
  },
  ...backends.map((backend) => ({
    name: `two nodes on ${backend.name}`,
    up: backend.up,
    start: async () => {
      const database = await backend.fresh();
      // Nodes of one catalog share its warehouse (a shared volume in production).
      const warehouse = mkdtempSync(join(tmpdir(), 'idem-shared-warehouse-'));
      const env = { WAREHOUSE: warehouse };
      const nodes = await Promise.all([startNode(database.url, env), startNode(database.url, env)]);
      return {
        nodes,
        close: async () => {
          for (const node of nodes) await node.close();
          await database.drop();
          rmSync(warehouse, { recursive: true, force: true });
        },
      };
    },
  })),
];

const setProperty = (name: string, value: string) => ({
  requirements: [],
  updates: [{ action: 'set-properties', updates: { [name]: value } }],
});

for (const setup of setups) {
  describe.runIf(await setup.up())(`concurrent commits to one table (${setup.name})`, () => {
    async function withTable(body: (nodes: Node[], url: (i: number) => string) => Promise<void>) {
      const { nodes, close } = await setup.start();
      try {
        const first = nodes[0] as Node;
        await call(first.url, 'POST', '/v1/namespaces', { body: { namespace: ['c'] } });
        await call(first.url, 'POST', '/v1/namespaces/c/tables', { body: { name: 't', schema } });
        await body(nodes, (i) => (nodes[i % nodes.length] as Node).url);
      } finally {
        await close();
      }
    }

    test('24 commits without requirements at once: all 24 succeed and all 24 changes are there', () =>
      withTable(async (_nodes, url) => {
        const answers = await Promise.all(
          Array.from({ length: 24 }, (_, i) =>
            call(url(i), 'POST', '/v1/namespaces/c/tables/t', { body: setProperty(`p${i}`, String(i)) }),
          ),
        );
        expect(answers.map((a) => a.status)).toEqual(Array.from({ length: 24 }, () => 200));
        const table = (await call(url(0), 'GET', '/v1/namespaces/c/tables/t')).json();
        for (let i = 0; i < 24; i++) expect(table.metadata.properties[`p${i}`]).toBe(String(i));
        expect(table.metadata['metadata-log']).toHaveLength(24);
      }));

    test('a requirement that fails against the fresh metadata is still a 409 CommitFailedException', () =>
      withTable(async (_nodes, url) => {
        const loaded = (await call(url(0), 'GET', '/v1/namespaces/c/tables/t')).json();
        const uuid = loaded.metadata['table-uuid'];
        const guarded = {
          requirements: [{ type: 'assert-current-schema-id', 'current-schema-id': 0 }],
          updates: [
            { action: 'add-schema', schema: { ...schema, 'schema-id': 1 } },
            { action: 'set-current-schema', 'schema-id': -1 },
          ],
        };
        // Two commits that each require schema 0 and move the table past it: one wins, the other's
        // requirement fails on the fresh metadata, whatever the order.
        const answers = await Promise.all(
          [0, 1].map((i) => call(url(i), 'POST', '/v1/namespaces/c/tables/t', { body: guarded })),
        );
        expect(answers.map((a) => a.status).sort()).toEqual([200, 409]);
        expect(answers.find((a) => a.status === 409)?.json().error.type).toBe('CommitFailedException');
        expect((await call(url(0), 'GET', '/v1/namespaces/c/tables/t')).json().metadata['table-uuid']).toBe(
          uuid,
        );
      }));

    test('a multi-table transaction racing single commits on both tables: every change applied once', () =>
      withTable(async (_nodes, url) => {
        await call(url(0), 'POST', '/v1/namespaces/c/tables', { body: { name: 'u', schema } });
        const both = {
          'table-changes': ['t', 'u'].map((name) => ({
            identifier: { namespace: ['c'], name },
            ...setProperty('tx', 'yes'),
          })),
        };
        const answers = await Promise.all([
          call(url(0), 'POST', '/v1/transactions/commit', { body: both }),
          ...Array.from({ length: 6 }, (_, i) =>
            call(url(i + 1), 'POST', `/v1/namespaces/c/tables/${i % 2 === 0 ? 't' : 'u'}`, {
              body: setProperty(`s${i}`, String(i)),
            }),
          ),
        ]);
        expect(answers.map((a) => a.status)).toEqual([204, 200, 200, 200, 200, 200, 200]);
        for (const name of ['t', 'u']) {
          const { properties } = (await call(url(0), 'GET', `/v1/namespaces/c/tables/${name}`)).json()
            .metadata;
          expect(properties.tx).toBe('yes');
        }
      }));
  });
}

describe('the metadata log', () => {
  test('keeps at most write.metadata.previous-versions-max entries; old files stay unless delete-after-commit', async () => {
    const node = await startNode('sqlite::memory:');
    try {
      await call(node.url, 'POST', '/v1/namespaces', { body: { namespace: ['m'] } });
      await call(node.url, 'POST', '/v1/namespaces/m/tables', {
        body: { name: 'kept', schema, properties: { 'write.metadata.previous-versions-max': '3' } },
      });
      const files: string[] = [];
      for (let i = 0; i < 6; i++) {
        const answer = await call(node.url, 'POST', '/v1/namespaces/m/tables/kept', {
          body: setProperty('n', String(i)),
        });
        files.push(answer.json()['metadata-location']);
      }
      const { metadata } = (await call(node.url, 'GET', '/v1/namespaces/m/tables/kept')).json();
      expect(metadata['metadata-log']).toHaveLength(3);
      expect(metadata['metadata-log'].map((e: { 'metadata-file': string }) => e['metadata-file'])).toEqual(
        files.slice(2, 5),
      );
      // Versions keep counting past the log's length: the last file is version 6.
      expect(files.at(-1)).toMatch(/\/00006-[^/]+\.metadata\.json$/);
      for (const file of files) expect(existsSync(fileURLToPath(file))).toBe(true);
    } finally {
      await node.close();
    }
  });

  test('with write.metadata.delete-after-commit.enabled, files that fall out of the log are deleted', async () => {
    const node = await startNode('sqlite::memory:');
    try {
      await call(node.url, 'POST', '/v1/namespaces', { body: { namespace: ['m'] } });
      const created = await call(node.url, 'POST', '/v1/namespaces/m/tables', {
        body: {
          name: 'pruned',
          schema,
          properties: {
            'write.metadata.previous-versions-max': '2',
            'write.metadata.delete-after-commit.enabled': 'true',
          },
        },
      });
      const files = [created.json()['metadata-location'] as string];
      for (let i = 0; i < 5; i++) {
        const answer = await call(node.url, 'POST', '/v1/namespaces/m/tables/pruned', {
          body: setProperty('n', String(i)),
        });
        files.push(answer.json()['metadata-location']);
      }
      const present = files.map((file) => existsSync(fileURLToPath(file)));
      // The current file and the two the log remembers are kept; the three older ones are gone.
      expect(present).toEqual([false, false, false, true, true, true]);
    } finally {
      await node.close();
    }
  });
});
