import { randomUUID } from 'node:crypto';
import { createIdempotency, ErrorCode, IdemStoreLimitError, isStoreLimitError } from '@idem/core';
import { createSqlStore, ensureSchema } from '@idem/store-sql';
import Database from 'better-sqlite3';
import { drizzle } from 'drizzle-orm/better-sqlite3';
import { v7 } from 'uuid';
import { describe, expect, test } from 'vitest';
import {
  makeMysqlStore,
  makePgStore,
  makeSqliteMemoryStore,
  mysqlTable,
  mysqlUp,
  pgUp,
} from './support/backends.js';

const nowMs = Date.UTC(2030, 0, 1);
const params = (overrides: { scope?: string; key?: string; fingerprint?: string } = {}) => ({
  scope: 's',
  key: v7(),
  fingerprint: 'f',
  owner: randomUUID(),
  nowMs,
  leaseUntilMs: nowMs + 1_000,
  expiresAtMs: nowMs + 2_000,
  ...overrides,
});

describe('values the table cannot hold are refused, never truncated', () => {
  test.each([
    ['a scope over 255 characters', { scope: 's'.repeat(256) }, /scope has 256 characters/],
    ['a key over 255 characters', { key: 'k'.repeat(300) }, /key has 300 characters/],
    ['a fingerprint over 255 characters', { fingerprint: 'f'.repeat(256) }, /fingerprint has 256/],
    ['NUL in a scope', { scope: 'a\u0000b' }, /scope contains a NUL/],
    ['NUL in a key', { key: '\u0000' }, /key contains a NUL/],
    ['a lone surrogate in a scope', { scope: 'a\udc00' }, /scope is not well-formed/],
  ])('%s', async (_, overrides, message) => {
    const { store, cleanup } = await makeSqliteMemoryStore();
    const p = params(overrides);
    await expect(store.reserve(p)).rejects.toThrow(IdemStoreLimitError);
    await expect(store.reserve(p)).rejects.toSatisfy(isStoreLimitError);
    await expect(store.reserve(p)).rejects.toThrow(message);
    expect(await store.purgeExpired({ beforeMs: Number.MAX_SAFE_INTEGER, limit: 10 })).toBe(0);
    await cleanup?.();
  });

  test('exactly 255 characters fit', async () => {
    const { store, cleanup } = await makeSqliteMemoryStore();
    const p = params({ scope: 'é'.repeat(255), key: 'k'.repeat(255) });
    expect((await store.reserve(p)).outcome).toBe('reserved');
    expect((await store.load(p))?.scope).toBe('é'.repeat(255));
    await cleanup?.();
  });

  test('a body over maxBodyBytes is refused and the reservation stays in flight', async () => {
    const db = drizzle(new Database(':memory:'));
    await ensureSchema(db, { dialect: 'sqlite' });
    const store = createSqlStore(db, { dialect: 'sqlite', maxBodyBytes: 10 });
    const p = params();
    await store.reserve(p);
    const response = { status: 200, headers: {}, body: new Uint8Array(11) };
    await expect(store.finalize({ ...p, response })).rejects.toThrow(/11 bytes; this store holds at most 10/);
    expect((await store.load(p))?.response).toBeNull();
  });

  test('an unsafe table name is refused before any SQL runs', () => {
    expect(() => createSqlStore({} as never, { dialect: 'sqlite', table: 'x; DROP TABLE y' })).toThrow(
      TypeError,
    );
  });
});

describe.runIf(await mysqlUp())('MariaDB keeps keys exact', () => {
  test('keys differing only in case, accents or trailing space are different records', async () => {
    const { store, drop } = await mysqlTable(2);
    try {
      for (const key of ['Key-a', 'key-a', 'kéy-a', 'key-a ']) {
        expect((await store.reserve(params({ key }))).outcome, key).toBe('reserved');
      }
    } finally {
      await drop();
    }
  });
});

const backends = [
  ['SQLite', makeSqliteMemoryStore],
  ...((await pgUp()) ? ([['PostgreSQL', makePgStore]] as const) : []),
  ...((await mysqlUp()) ? ([['MariaDB', makeMysqlStore()]] as const) : []),
] as const;

describe('through the coordinator, a value the store cannot hold is a 4xx, never an outage (503)', () => {
  const request = { method: 'POST', route: '/r', key: v7() };

  for (const [name, make] of backends) {
    test.each([
      ['a 300-character scope', 's'.repeat(300)],
      ['a scope with NUL', 'tenant\u0000a'],
      ['a scope with a lone surrogate', 'tenant\ud800'],
    ])(`${name}: %s → 400 IDEMPOTENCY_STORE_LIMIT, nothing stored`, async (_, scope) => {
      const { store, cleanup } = await make();
      try {
        const idem = createIdempotency({ store, heartbeatIntervalMs: false });
        const result = await idem.begin({ ...request, scope });
        expect(result.action === 'reject' && [result.error.status, result.error.code]).toEqual([
          400,
          ErrorCode.StoreLimit,
        ]);
        expect(await store.purgeExpired({ beforeMs: Number.MAX_SAFE_INTEGER, limit: 10 })).toBe(0);
      } finally {
        await cleanup?.();
      }
    });

    test(`${name}: headers over 64 KiB at finalize → the status and body are kept, never run again`, async () => {
      const { store, cleanup } = await make();
      try {
        const idem = createIdempotency({ store, heartbeatIntervalMs: false, replayHeaders: ['link'] });
        const first = await idem.begin(request);
        if (first.action !== 'execute') throw new Error(first.action);
        const huge = { status: 201, headers: { link: 'x'.repeat(70_000) }, body: '{}' };
        expect(await first.execution.finish(huge)).toBe('finalized');
        for (let retry = 0; retry < 3; retry++) {
          const replay = await idem.begin(request);
          if (replay.action !== 'replay') throw new Error(replay.action);
          expect(replay.response.status).toBe(201);
          expect(replay.response.headers['idempotent-replay-headers-omitted']).toBe('true');
          expect(Buffer.from(replay.response.body ?? []).toString()).toBe('{}');
        }
      } finally {
        await cleanup?.();
      }
    });
  }

  test('the store declares its body limit: the coordinator stores larger bodies as omitted', async () => {
    const db = drizzle(new Database(':memory:'));
    await ensureSchema(db, { dialect: 'sqlite' });
    const store = createSqlStore(db, { dialect: 'sqlite', maxBodyBytes: 10 });
    expect(store.limits).toEqual({ maxBodyBytes: 10 });
    const idem = createIdempotency({ store, heartbeatIntervalMs: false });
    const first = await idem.begin(request);
    if (first.action !== 'execute') throw new Error(first.action);
    expect(await first.execution.finish({ status: 200, headers: {}, body: 'x'.repeat(11) })).toBe(
      'finalized',
    );
    const replay = await idem.begin(request);
    expect(replay.action === 'replay' && replay.response.headers['idempotent-replay-body-omitted']).toBe(
      'true',
    );
  });
});
