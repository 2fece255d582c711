import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { IdempotencyRecord } from '@idem/core';
import { afterEach, describe, expect, test } from 'vitest';
import type { CatalogDatabase } from '../src/database/catalog-database.js';
import { exclusive } from '../src/database/serialized.js';
import { openSqlite } from '../src/database/sqlite.js';

// The coordinator reads a key's record before a keyed mutation's transaction (readBeforeTransaction). On SQLite
// every transaction runs on the process's one connection: the read runs at once when none is open, and waits
// for its turn when one is, so that it never sees an answer that may still roll back.

let db: CatalogDatabase | undefined;
afterEach(async () => {
  await db?.close();
  db = undefined;
});

const open = async () => {
  db = await openSqlite(join(mkdtempSync(join(tmpdir(), 'idem-read-at-once-')), 'catalog.db'));
  return db;
};

const NOW = Date.UTC(2030, 0, 1);
const reservation = (key: string, owner: string) => ({
  scope: 's',
  key,
  fingerprint: 'f',
  owner,
  nowMs: NOW,
  leaseUntilMs: NOW + 30_000,
  expiresAtMs: NOW + 600_000,
});
/** A promise and the function that resolves it. */
function deferred() {
  let open = () => {};
  const wait = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { wait, open };
}

const response = { status: 201, headers: { 'content-type': 'application/json' }, body: Buffer.from('{}') };

describe('exclusive: idle while nothing holds the connection', () => {
  test('busy from the moment a task is handed in until it settled, thrown or not', async () => {
    const turn = exclusive();
    expect(turn.idle).toBe(true);
    const held = deferred();
    const first = turn(() => held.wait);
    const second = turn(async () => {
      throw new Error('refused');
    });
    expect(turn.idle).toBe(false);
    held.open();
    await first;
    await expect(second).rejects.toThrow('refused');
    expect(turn.idle).toBe(true);
  });
});

describe('the SQLite store read (load) beside the catalog’s transactions', () => {
  test('with no transaction open, answered at once: a record, not a promise', async () => {
    const { store } = await open();
    await store.reserve(reservation('k', 'o'));
    await store.finalize({ scope: 's', key: 'k', owner: 'o', response, nowMs: NOW });
    const read = store.load({ scope: 's', key: 'k' });
    expect(read).not.toBeInstanceOf(Promise);
    expect((read as IdempotencyRecord).response?.status).toBe(201);
    expect(store.load({ scope: 's', key: 'none' })).toBeUndefined();
  });

  test('with a transaction open, it waits its turn: an answer written there and rolled back is never read', async () => {
    const database = await open();
    const held = deferred();
    const inside = deferred();
    const transaction = database
      .transaction(async (tx) => {
        await tx.idempotency.reserve(reservation('k', 'o'));
        await tx.idempotency.finalize({ scope: 's', key: 'k', owner: 'o', response, nowMs: NOW });
        inside.open();
        await held.wait;
        throw new Error('rolled back');
      })
      .catch((error: unknown) => error);
    await inside.wait;
    const read = database.store.load({ scope: 's', key: 'k' });
    expect(read).toBeInstanceOf(Promise);
    held.open();
    expect(await read).toBeUndefined();
    expect(await transaction).toBeInstanceOf(Error);
  });

  test('a read that fails is a rejected promise, never a throw', async () => {
    const { store } = await open();
    const read = store.load({ scope: 's', key: 'x'.repeat(100_000) });
    await expect(read).rejects.toThrow();
  });
});
