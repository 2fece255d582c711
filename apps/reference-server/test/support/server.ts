import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { IdempotencyStore, MaybePromise } from '@idem/core';
import { DEFAULT_TABLE } from '@idem/store-sql';
import { sql } from 'drizzle-orm';
import type { FastifyInstance } from 'fastify';
import { v7 } from 'uuid';
import { buildApp } from '../../src/app.js';
import { loadConfig } from '../../src/config.js';
import type { CatalogDatabase } from '../../src/database/catalog-database.js';
import { openDatabase } from '../../src/database/open.js';
import { databaseOptions } from '../../src/database/options.js';

export interface Node {
  url: string;
  /** The node's warehouse directory (a fresh temporary one). */
  warehouse: string;
  app: FastifyInstance;
  db: CatalogDatabase;
  close(): Promise<void>;
}

export interface NodeOptions {
  /**
   * Awaited at the start of every catalog transaction, before its body: with a leased store, its key is
   * reserved already and its work (and the fence before its commit) still to come.
   */
  readonly atBegin?: () => Promise<void>;
  /**
   * Awaited in every catalog transaction right after the key's reservation there answered (with the catalog's
   * own store: its row inserted and locked), before the work: a test holds a keyed mutation in flight with it.
   */
  readonly afterReserve?: () => Promise<void>;
  /**
   * Awaited before each call of the node's store outside a transaction (the read before one, the refusal stored
   * after its transaction rolled back): one that throws is a store fault there.
   */
  readonly beforeStoreCall?: (call: string) => Promise<void>;
  /**
   * Awaited by every catalog transaction after its work, before its commit (its key reserved, with the catalog's
   * own store its row locked): a test holds a mutation in flight with it.
   */
  readonly beforeCommit?: () => Promise<void>;
  /**
   * Awaited after every catalog transaction that committed: one that throws makes the commit look failed to the
   * server (a CommitOutcomeUnknown: a commit that went through but whose answer was lost).
   */
  readonly afterCommit?: () => Promise<void>;
  /**
   * With a store of its own (IDEMPOTENCY_STORE_URL, memory), wait until `/health` says it answers before
   * resolving, as a test means to use it. `false`: a test of a store that is not there. @default true
   */
  readonly waitForStore?: boolean;
}

/** Start one catalog node over `databaseUrl` (each node its own pool), listening on a free port. */
export async function startNode(
  databaseUrl: string,
  env: Record<string, string> = {},
  options: NodeOptions = {},
): Promise<Node> {
  const warehouse = mkdtempSync(join(tmpdir(), 'idem-warehouse-'));
  const config = loadConfig({ DATABASE_URL: databaseUrl, WAREHOUSE: warehouse, LOG_LEVEL: 'silent', ...env });
  const db = await openDatabase(config.databaseUrl, databaseOptions(config));
  const { atBegin, afterReserve, beforeCommit, afterCommit, beforeStoreCall } = options;
  const held: CatalogDatabase =
    atBegin === undefined &&
    afterReserve === undefined &&
    beforeCommit === undefined &&
    afterCommit === undefined &&
    beforeStoreCall === undefined
      ? db
      : {
          ...db,
          store: beforeStoreCall === undefined ? db.store : storeBehind(db.store, beforeStoreCall),
          transaction: async (body, deadline) => {
            const result = await db.transaction(async (tx) => {
              await atBegin?.();
              const reserve = tx.idempotency.reserve;
              const value = await body(
                afterReserve === undefined
                  ? tx
                  : {
                      ...tx,
                      idempotency: {
                        ...tx.idempotency,
                        reserve: async (params) => {
                          const found = await reserve(params);
                          await afterReserve();
                          return found;
                        },
                      },
                    },
              );
              await beforeCommit?.();
              return value;
            }, deadline);
            await afterCommit?.();
            return result;
          },
        };
  const app = await buildApp(config, held);
  const url = await app.listen({ host: '127.0.0.1', port: 0 });
  if (config.idempotency.store.fence === 'lease' && options.waitForStore !== false) await storeAnswers(url);
  return {
    url,
    warehouse,
    app,
    db,
    async close() {
      await app.close();
      await db.close();
      rmSync(warehouse, { recursive: true, force: true });
    },
  };
}

/** `store` with `before` awaited ahead of each of its calls. */
function storeBehind(store: IdempotencyStore, before: (call: string) => Promise<void>): IdempotencyStore {
  const behind =
    <P, R>(name: string, call: (params: P) => MaybePromise<R>) =>
    async (params: P): Promise<R> => {
      await before(name);
      return call(params);
    };
  return {
    ...store,
    reserve: behind('reserve', (params) => store.reserve(params)),
    load: behind('load', (params) => store.load(params)),
    finalize: behind('finalize', (params) => store.finalize(params)),
    release: behind('release', (params) => store.release(params)),
    renewLease: behind('renewLease', (params) => store.renewLease(params)),
    purgeExpired: behind('purgeExpired', (params) => store.purgeExpired(params)),
  };
}

/** Resolves once the node's `/health` is 200 (its database and its idempotency store answer), within 10 s. */
async function storeAnswers(url: string): Promise<void> {
  const untilMs = performance.now() + 10_000;
  for (;;) {
    const response = await fetch(`${url}/health`);
    const body = await response.text();
    if (response.status === 200) return;
    if (performance.now() > untilMs) throw new Error(`the node's idempotency store never answered: ${body}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/** A node on an in-memory SQLite catalog that holds namespace `n` and, in it, the table `table`. */
export async function startNodeWithTable(table = 't'): Promise<Node> {
  const node = await startNode('sqlite::memory:');
  await call(node.url, 'POST', '/v1/namespaces', { body: { namespace: ['n'] } });
  await call(node.url, 'POST', '/v1/namespaces/n/tables', { body: { name: table, schema } });
  return node;
}

/** A fresh UUIDv7 key, as a client mints one. */
export const newKey = (): string => v7();

export interface Answer {
  status: number;
  headers: Headers;
  text: string;
  // biome-ignore lint/suspicious/noExplicitAny: tests read answers field by field.
  json(): any;
}

export async function call(
  url: string,
  method: string,
  path: string,
  options: { body?: unknown; key?: string; token?: string; raw?: string } = {},
): Promise<Answer> {
  const headers: Record<string, string> = {};
  if (options.body !== undefined || options.raw !== undefined) headers['content-type'] = 'application/json';
  if (options.key !== undefined) headers['idempotency-key'] = options.key;
  if (options.token !== undefined) headers.authorization = `Bearer ${options.token}`;
  const response = await fetch(url + path, {
    method,
    headers,
    ...(options.raw !== undefined
      ? { body: options.raw }
      : options.body !== undefined
        ? { body: JSON.stringify(options.body) }
        : {}),
  });
  const text = await response.text();
  return { status: response.status, headers: response.headers, text, json: () => JSON.parse(text) };
}

export const schema = {
  type: 'struct',
  'schema-id': 0,
  fields: [
    { id: 1, name: 'id', required: true, type: 'long' },
    { id: 2, name: 'name', required: false, type: 'string' },
  ],
};

/**
 * Valid format-v2 table metadata at `location`: {@link schema} as its only schema, one unpartitioned spec and
 * one unsorted order; `fields` replaces or adds members (more schemas, another UUID, …).
 */
export function tableMetadata(
  location: string,
  fields: Record<string, unknown> = {},
): Record<string, unknown> {
  return {
    'format-version': 2,
    'table-uuid': '9c12d441-03fe-4693-9a96-a0705ddf69c1',
    location,
    'last-updated-ms': 1,
    'last-column-id': 2,
    schemas: [schema],
    'current-schema-id': 0,
    'partition-specs': [{ 'spec-id': 0, fields: [] }],
    'default-spec-id': 0,
    'last-partition-id': 999,
    'sort-orders': [{ 'order-id': 0, fields: [] }],
    'default-sort-order-id': 0,
    ...fields,
  };
}

/** How many idempotency records the node's database holds: all of them, or those of one key. */
export async function idempotencyRecords(node: Node, key?: string): Promise<number> {
  const table = sql.identifier(DEFAULT_TABLE);
  const [row] = await node.db.rows(
    key === undefined
      ? sql`SELECT count(*) AS n FROM ${table}`
      : sql`SELECT count(*) AS n FROM ${table} WHERE idem_key = ${key}`,
  );
  return Number(row?.n);
}
