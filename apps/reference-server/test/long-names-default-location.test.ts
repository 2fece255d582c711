import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { MAX_LOCATION_BYTES, MAX_NAME_BYTES, MAX_NAMESPACE_BYTES } from '../src/catalog/limits.js';
import { openWarehouse } from '../src/catalog/warehouse.js';
import { call, type Node, schema, startNode } from './support/server.js';

// Names within every documented limit always make a default location the catalog can use: the location limit
// is the decoded path's, and a `file:` URL's escapes (3 characters a byte) never count against it. A location
// the catalog wrote can be sent back as it is (register).

let node: Node;
beforeAll(async () => {
  node = await startNode('sqlite::memory:');
});
afterAll(async () => node.close());

const encoded = (levels: string[]) => levels.map(encodeURIComponent).join('%1F');

describe('the longest names, in characters that escape', () => {
  test.each([
    ['é (2 bytes, 6 characters escaped)', 'é'],
    ['a space (1 byte, 3 characters escaped)', ' '],
  ])(
    'namespace levels and a name of %s: created, and registered again from its own location',
    async (_label, char) => {
      // Four levels of 253 bytes (1015 with the separators, under MAX_NAMESPACE_BYTES) and a 255-byte name.
      const fill = (first: string, bytes: number) =>
        first + char.repeat((bytes - 1) / Buffer.byteLength(char));
      const levels = ['a', 'b', 'c', 'd'].map((first) => fill(first, 253));
      const name = fill('t', MAX_NAME_BYTES);
      expect(Buffer.byteLength(levels.join('\u001f'))).toBeLessThanOrEqual(MAX_NAMESPACE_BYTES);
      expect(Buffer.byteLength(name)).toBe(MAX_NAME_BYTES);
      for (let depth = 1; depth <= levels.length; depth++) {
        const created = await call(node.url, 'POST', '/v1/namespaces', {
          body: { namespace: levels.slice(0, depth) },
        });
        expect(created.status, created.text).toBe(200);
      }
      const table = await call(node.url, 'POST', `/v1/namespaces/${encoded(levels)}/tables`, {
        body: { name, schema },
      });
      expect(table.status, table.text).toBe(200);
      const metadataLocation: string = table.json()['metadata-location'];
      expect(Buffer.byteLength(metadataLocation)).toBeGreaterThan(MAX_LOCATION_BYTES);

      const path = `/v1/namespaces/${encoded(levels)}`;
      expect(
        (await call(node.url, 'POST', `${path}/tables/${encodeURIComponent(name)}/unregister`)).status,
      ).toBe(200);
      const registered = await call(node.url, 'POST', `${path}/register`, {
        body: { name, 'metadata-location': metadataLocation },
      });
      expect(registered.status, registered.text).toBe(200);
      const committed = await call(node.url, 'POST', `${path}/tables/${encodeURIComponent(name)}`, {
        body: { requirements: [], updates: [{ action: 'set-properties', updates: { a: 'b' } }] },
      });
      expect(committed.status, committed.text).toBe(200);
    },
  );

  test(`a location naming a path past ${MAX_LOCATION_BYTES} bytes is still a 400`, async () => {
    await call(node.url, 'POST', '/v1/namespaces', { body: { namespace: ['n'] } });
    const location = `${node.warehouse}/${'x'.repeat(200)}/`.repeat(11);
    const answer = await call(node.url, 'POST', '/v1/namespaces/n/tables', {
      body: { name: 'far', schema, location },
    });
    expect(answer.status, answer.text).toBe(400);
    expect(answer.json().error.message).toMatch(`at most ${MAX_LOCATION_BYTES} bytes`);
  });
});

test('a warehouse directory too long to hold every default location stops the server at startup', async () => {
  const parent = mkdtempSync(join(tmpdir(), 'idem-long-'));
  try {
    const directory = join(parent, ...Array.from({ length: 4 }, () => 'd'.repeat(200)));
    await expect(openWarehouse({ directory, maxBytes: 1024, timeoutMs: 1000 })).rejects.toThrow(
      /leave room for every default location/,
    );
  } finally {
    rmSync(parent, { recursive: true, force: true });
  }
});
