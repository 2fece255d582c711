import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { call, type Node, schema, startNode } from './support/server.js';

// Sort order ids as Iceberg assigns them, since its readers (Java, PyIceberg, iceberg-go, iceberg-rust) refuse
// metadata whose unsorted order is not id 0 ("Unsorted order ID must be 0") or whose sorted order is: a create
// gets 0 for no write order and 1 for one, whatever id the client sent; a commit's unsorted order is 0, added
// once, and a sorted one the next id after the highest. Before, a commit's unsorted order got the next id (a
// replace transaction made a table Iceberg could not read), and a create kept the client's id (0 by default).

let node: Node;
beforeAll(async () => {
  node = await startNode('sqlite::memory:');
  await call(node.url, 'POST', '/v1/namespaces', { body: { namespace: ['n'] } });
});
afterAll(async () => node.close());

const sorted = (id = 0) => ({
  'order-id': id,
  fields: [{ transform: 'identity', 'source-id': 1, direction: 'asc', 'null-order': 'nulls-first' }],
});
const unsorted = (id = 0) => ({ 'order-id': id, fields: [] });

interface Orders {
  readonly ids: number[];
  readonly unsortedIds: number[];
  readonly defaultId: number;
}

const ordersOf = (metadata: {
  'sort-orders': { 'order-id': number; fields: unknown[] }[];
  'default-sort-order-id': number;
}): Orders => ({
  ids: metadata['sort-orders'].map((order) => order['order-id']),
  unsortedIds: metadata['sort-orders'].filter((o) => o.fields.length === 0).map((o) => o['order-id']),
  defaultId: metadata['default-sort-order-id'],
});

let tables = 0;
async function create(writeOrder?: object): Promise<{ name: string; orders: Orders }> {
  const name = `t${tables++}`;
  const created = await call(node.url, 'POST', '/v1/namespaces/n/tables', {
    body: { name, schema, ...(writeOrder === undefined ? {} : { 'write-order': writeOrder }) },
  });
  expect(created.status, created.text).toBe(200);
  return { name, orders: ordersOf(created.json().metadata) };
}

async function commit(name: string, updates: unknown[]): Promise<Orders> {
  const committed = await call(node.url, 'POST', `/v1/namespaces/n/tables/${name}`, {
    body: { requirements: [], updates },
  });
  expect(committed.status, committed.text).toBe(200);
  return ordersOf(committed.json().metadata);
}

describe('a create', () => {
  test.for<[string, object | undefined, Orders]>([
    ['no write order', undefined, { ids: [0], unsortedIds: [0], defaultId: 0 }],
    ['an unsorted one with id 7', unsorted(7), { ids: [0], unsortedIds: [0], defaultId: 0 }],
    ['a sorted one with id 0', sorted(0), { ids: [1], unsortedIds: [], defaultId: 1 }],
    ['a sorted one with id 9', sorted(9), { ids: [1], unsortedIds: [], defaultId: 1 }],
  ])('%s', async ([, writeOrder, expected]) => {
    expect((await create(writeOrder)).orders).toEqual(expected);
  });
});

describe('a commit that adds a sort order', () => {
  test.for<[string, object | undefined, unknown[], Orders]>([
    [
      'unsorted, to a table that has order 0 unsorted: that one, nothing added',
      undefined,
      [
        { action: 'add-sort-order', 'sort-order': unsorted(3) },
        { action: 'set-default-sort-order', 'sort-order-id': -1 },
      ],
      { ids: [0], unsortedIds: [0], defaultId: 0 },
    ],
    [
      'unsorted, to a table created sorted: id 0',
      sorted(),
      [
        { action: 'add-sort-order', 'sort-order': unsorted() },
        { action: 'set-default-sort-order', 'sort-order-id': -1 },
      ],
      { ids: [1, 0], unsortedIds: [0], defaultId: 0 },
    ],
    [
      'sorted, to an unsorted table: id 1',
      undefined,
      [
        { action: 'add-sort-order', 'sort-order': sorted(0) },
        { action: 'set-default-sort-order', 'sort-order-id': -1 },
      ],
      { ids: [0, 1], unsortedIds: [0], defaultId: 1 },
    ],
    [
      'sorted, then unsorted, in one commit: 1, then 0 again',
      undefined,
      [
        { action: 'add-sort-order', 'sort-order': sorted() },
        { action: 'add-sort-order', 'sort-order': unsorted() },
        { action: 'set-default-sort-order', 'sort-order-id': -1 },
      ],
      { ids: [0, 1], unsortedIds: [0], defaultId: 0 },
    ],
  ])('%s', async ([, writeOrder, updates, expected]) => {
    const { name } = await create(writeOrder);
    expect(await commit(name, updates)).toEqual(expected);
  });
});
