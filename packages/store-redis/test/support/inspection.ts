import type { IdempotencyStore, ListedRecord, ListParams, ReserveParams } from '@idem/core';
import { Redis } from 'ioredis';
import { expect } from 'vitest';
import { globLiteral } from '../../src/key-layout.js';
import { NOW_MS, reserveParams, response } from './params.js';
import { CLUSTER_NODES, type ClientKind, isClusterKind, REDIS_URL } from './servers.js';

/** A store with the inspection methods, which the Redis store always has. */
export type InspectableStore = IdempotencyStore &
  Required<Pick<IdempotencyStore, 'forget' | 'list' | 'stats'>>;

export const inspectable = (store: IdempotencyStore): InspectableStore => {
  if (store.forget === undefined || store.list === undefined || store.stats === undefined) {
    throw new Error('the store has no forget, list or stats');
  }
  return store as InspectableStore;
};

/** One record's identity, for comparing listings. */
export const idOf = (record: { scope: string; key: string }) => JSON.stringify([record.scope, record.key]);

/** Every page of a listing from the first, each checked to hold at most `limit` records. */
export async function listAll(
  store: InspectableStore,
  params: Omit<ListParams, 'cursor' | 'nowMs'> & { nowMs?: number },
): Promise<{ records: ListedRecord[]; pages: number; cursors: string[] }> {
  const records: ListedRecord[] = [];
  const cursors: string[] = [];
  let cursor: string | null = null;
  let pages = 0;
  do {
    const page: Awaited<ReturnType<InspectableStore['list']>> = await store.list({
      nowMs: NOW_MS,
      ...params,
      ...(cursor === null ? {} : { cursor }),
    });
    expect(page.records.length).toBeLessThanOrEqual(params.limit);
    records.push(...page.records);
    cursor = page.cursor;
    if (cursor !== null) cursors.push(cursor);
    pages += 1;
    if (pages > 100_000) throw new Error('the listing never ends');
  } while (cursor !== null);
  return { records, pages, cursors };
}

/** Expect each of `expected` listed exactly once, and nothing else. */
export function expectExactlyOnce(
  listed: readonly ListedRecord[],
  expected: readonly { scope: string; key: string }[],
) {
  expect(listed.map(idOf).sort()).toEqual(expected.map(idOf).sort());
}

/**
 * `count` records in `scope`: every other one completed (with a body of its own), the rest in flight. Reserved
 * `concurrency` at a time.
 */
export async function seed(
  store: IdempotencyStore,
  scope: string,
  count: number,
  concurrency = 50,
): Promise<ReserveParams[]> {
  const made: ReserveParams[] = [];
  for (let from = 0; from < count; from += concurrency) {
    const batch = Array.from({ length: Math.min(concurrency, count - from) }, (_, i) =>
      reserveParams(scope, `k${from + i}-${Math.random().toString(36).slice(2)}`),
    );
    await Promise.all(
      batch.map(async (params, i) => {
        expect((await store.reserve(params)).outcome).toBe('reserved');
        if ((from + i) % 2 === 0) {
          expect(await store.finalize({ ...params, nowMs: NOW_MS, response: response(`r${from + i}`) })).toBe(
            true,
          );
        }
      }),
    );
    made.push(...batch);
  }
  return made;
}

/** Raw connections to the standalone server, or to each node of the shared cluster. */
export const rawNodes = (kind: ClientKind) =>
  isClusterKind(kind) ? CLUSTER_NODES.map((node) => new Redis(node)) : [new Redis(REDIS_URL)];

/** `rawPrefix` taken literally, then anything: a SCAN or KEYS pattern. */
const under = (rawPrefix: string | Buffer) =>
  Buffer.concat([globLiteral(Buffer.from(rawPrefix)), Buffer.from('*')]);

/** How many keys under `rawPrefix` (taken literally) each node holds. */
export async function keysPerNode(kind: ClientKind, rawPrefix: string | Buffer): Promise<number[]> {
  const nodes = rawNodes(kind);
  try {
    const pattern = under(rawPrefix);
    return await Promise.all(
      nodes.map(async (node) => (await node.keysBuffer(pattern as unknown as string)).length),
    );
  } finally {
    for (const node of nodes) node.disconnect();
  }
}

/** Delete every key under `rawPrefix`, taken literally (glob characters in it included). */
export async function sweepLiteral(kind: ClientKind, rawPrefix: string | Buffer): Promise<void> {
  const nodes = rawNodes(kind);
  const pattern = under(rawPrefix);
  await Promise.all(
    nodes.map(async (node) => {
      try {
        let cursor = '0';
        do {
          const [next, keys] = await node.scanBuffer(
            cursor,
            'MATCH',
            pattern as unknown as string,
            'COUNT',
            1_000,
          );
          cursor = next.toString();
          await Promise.all(keys.map((key) => node.unlink(key)));
        } while (cursor !== '0');
      } finally {
        node.disconnect();
      }
    }),
  );
}

/** The position a cursor holds (its format is the store's own; tests read it to aim at what they attack). */
export const cursorParts = (cursor: string): unknown[] =>
  JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as unknown[];

export const cursorOf = (parts: unknown[]): string =>
  Buffer.from(JSON.stringify(parts), 'utf8').toString('base64url');
