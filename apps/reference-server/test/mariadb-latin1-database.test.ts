import { randomBytes } from 'node:crypto';
import mysql from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { backends, MYSQL_URL } from './support/databases.js';
import { view } from './support/hostile.js';
import { call, type Node, newKey, startNode } from './support/server.js';

// MariaDB before 11.6 (and any server configured so) creates databases in latin1 unless told otherwise: the
// catalog's columns name utf8mb4 themselves, so that non-Latin-1 text is stored as sent, not refused.

const mariadb = backends[1] as (typeof backends)[number];
describe.runIf(await mariadb.up())('MariaDB: a catalog database created in latin1', () => {
  let node: Node;
  const database = `ref_${randomBytes(5).toString('hex')}`;
  const admin = (statement: string) =>
    mysql.createConnection({ uri: MYSQL_URL }).then(async (connection) => {
      await connection.query(statement);
      await connection.end();
    });
  beforeAll(async () => {
    await admin(`CREATE DATABASE ${database} CHARACTER SET latin1`);
    const url = new URL(MYSQL_URL);
    url.pathname = `/${database}`;
    node = await startNode(url.href, { IDEMPOTENCY_PURGE_ENABLED: 'false' });
    await call(node.url, 'POST', '/v1/namespaces', { body: { namespace: ['n'] } });
  });
  afterAll(async () => {
    await node.close();
    await admin(`DROP DATABASE IF EXISTS ${database}`);
  });

  test.each([
    ['a CJK column name', '名前'],
    ['an emoji column name', 'price💶'],
    ['a Latin-1 column name', 'prénom'],
  ])('a table with %s: 200, and it loads as sent', async (_label, column) => {
    const name = `t${randomBytes(3).toString('hex')}`;
    const field = { id: 1, name: column, required: false, type: 'string' };
    const created = await call(node.url, 'POST', '/v1/namespaces/n/tables', {
      key: newKey(),
      body: { name, schema: { type: 'struct', fields: [field] } },
    });
    expect(created.status, created.text).toBe(200);
    const loaded = await call(node.url, 'GET', `/v1/namespaces/n/tables/${name}`);
    expect(loaded.json().metadata.schemas[0].fields[0].name).toBe(column);
  });

  test('namespace properties and a view with non-Latin-1 text', async () => {
    const namespace = await call(node.url, 'POST', '/v1/namespaces', {
      body: { namespace: ['p'], properties: { owner: '山田' } },
    });
    expect(namespace.status, namespace.text).toBe(200);
    expect((await call(node.url, 'GET', '/v1/namespaces/p')).json().properties).toEqual({ owner: '山田' });
    const sql = "SELECT '🦆' AS n";
    const created = await call(node.url, 'POST', '/v1/namespaces/p/views', {
      body: {
        ...view,
        name: 'v',
        'view-version': {
          ...view['view-version'],
          'default-namespace': ['p'],
          representations: [{ type: 'sql', sql, dialect: 'spark' }],
        },
      },
    });
    expect(created.status, created.text).toBe(200);
    const loaded = (await call(node.url, 'GET', '/v1/namespaces/p/views/v')).json();
    expect(loaded.metadata.versions[0].representations[0].sql).toBe(sql);
  });
});
