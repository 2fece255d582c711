import { isStoreLimitError, type StoredResponse } from '@idem/core';
import { createRedisStore, MAX_HEADERS_BYTES, MAX_IDENTIFIER_CHARS, recordKey } from '@idem/store-redis';
import { Redis } from 'ioredis';
import { createClientPool } from 'redis';
import { v7 } from 'uuid';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { NOW_MS, reserveParams, response } from './support/params.js';
import {
  type ClientKind,
  clusterUp,
  isClusterKind,
  openClient,
  REDIS_URL,
  redisUp,
  sweep,
  type TestClient,
  uniquePrefix,
} from './support/servers.js';

const standalone = await redisUp();
const cluster = await clusterUp();
const kinds: ClientKind[] = [
  ...(standalone ? (['ioredis', 'node-redis'] as const) : []),
  ...(cluster ? (['ioredis Cluster', 'node-redis cluster'] as const) : []),
];

describe('clients', () => {
  test('an unsupported client is a TypeError naming the supported ones', () => {
    for (const client of [{}, { sendCommand: async () => null }, new Map()]) {
      expect(() => createRedisStore(client)).toThrow(/ioredis Redis or Cluster, or a node-redis client/);
    }
    const pool = createClientPool({ url: REDIS_URL });
    expect(() => createRedisStore(pool)).toThrow(TypeError);
  });

  test('a prefix with a brace is refused: it would become every key hash tag', () => {
    const client = new Redis({ lazyConnect: true });
    expect(() => createRedisStore(client, { prefix: 'a{b}:' })).toThrow(TypeError);
    expect(() => createRedisStore(client, { replicas: { count: 1, timeoutMs: 0 } })).toThrow(RangeError);
    client.disconnect();
  });
});

describe('limits: refused with IdemStoreLimitError before any network call', () => {
  // A client that cannot send anything: any command would fail with a connection error instead.
  const offline = new Redis({
    port: 1,
    lazyConnect: true,
    enableOfflineQueue: false,
    retryStrategy: () => null,
  });
  const store = createRedisStore(offline, { maxBodyBytes: 100 });
  const long = 'x'.repeat(MAX_IDENTIFIER_CHARS + 1);
  const finalizing = (answer: StoredResponse) => () =>
    store.finalize({ scope: 's', key: 'k', owner: 'o', nowMs: NOW_MS, response: answer });

  test('the store declares its body limit', () => {
    expect(store.limits).toEqual({ maxBodyBytes: 100 });
    expect(createRedisStore(offline).limits).toEqual({ maxBodyBytes: 8 * 1024 * 1024 });
  });

  test.each([
    ['a scope too long', () => store.reserve(reserveParams(long))],
    ['a key too long', () => store.load({ scope: 's', key: long })],
    [
      'a fingerprint with a lone surrogate',
      () => store.reserve({ ...reserveParams('s'), fingerprint: '\ud800' }),
    ],
    ['an owner too long', () => store.release({ scope: 's', key: 'k', owner: long })],
    ['a time that is not an integer', () => store.reserve({ ...reserveParams('s'), nowMs: 1.5 })],
    [
      'a lease that is not an integer',
      () => store.renewLease({ scope: 's', key: 'k', owner: 'o', leaseUntilMs: Number.NaN }),
    ],
    ['a body over maxBodyBytes', finalizing(response('y'.repeat(101)))],
    [
      'a header map over the limit',
      finalizing({ status: 200, headers: { link: 'l'.repeat(MAX_HEADERS_BYTES) }, body: null }),
    ],
    ['a status that is not one', finalizing({ ...response(''), status: 42 })],
  ])('%s', async (_, call) => {
    await expect(call()).rejects.toSatisfy(isStoreLimitError);
  });

  afterAll(() => offline.disconnect());
});

describe('record keys', () => {
  test('user data never makes a brace, so the hash tag is always the store', () => {
    expect(recordKey('idem:', 'tenant-a', '0190b7e2-5a5d-7c3e-8f00-1234567890ab')).toBe(
      'idem:{tenant-a:0190b7e2-5a5d-7c3e-8f00-1234567890ab}',
    );
    expect(recordKey('idem:', '{x}:y', 'a\u0000b')).toBe('idem:{%7Bx%7D%3Ay:a%00b}');
    expect(recordKey('p:', 'caf\u00e9', '\ud800')).toBe('p:{caf%C3%A9:%ud800}');
    // Scope and key never run together, and a lone surrogate is not its replacement character.
    const keys = new Set(
      [
        ['ab', 'c'],
        ['a', 'bc'],
        ['a:b', 'c'],
        ['a', 'b:c'],
        ['\ud800', ''],
        ['\ufffd', ''],
        ['%u', 'd800'],
      ].map(([scope, key]) => recordKey('p:', scope as string, key as string)),
    );
    expect(keys.size).toBe(7);
  });
});

describe.each(kinds)('%s', (kind) => {
  let opened: TestClient;
  let prefix: string;
  beforeAll(async () => {
    opened = await openClient(kind);
    prefix = uniquePrefix();
  });
  afterAll(async () => {
    await opened.close();
    await sweep(kind, prefix);
  });

  test('the store names the client it recognised', () => {
    expect(createRedisStore(opened.client).client).toBe(kind);
  });

  test('scopes and keys with braces, colons, NUL and lone surrogates are distinct records, and round-trip', async () => {
    const store = createRedisStore(opened.client, { prefix });
    const names = ['{a}', '{a', 'a}', '}{', ':', 'a:b', '\u0000', 'a\u0000b', '\ud800', '\ufffd', '{}', ''];
    const refs = names.flatMap((scope) => names.map((key) => ({ scope, key })));
    for (const ref of refs) {
      const params = reserveParams(ref.scope, ref.key);
      const result = await store.reserve(params);
      expect(result.outcome, JSON.stringify(ref)).toBe('reserved');
      expect(
        await store.finalize({
          ...ref,
          owner: params.owner,
          nowMs: NOW_MS,
          response: response(JSON.stringify(ref)),
        }),
      ).toBe(true);
    }
    for (const ref of refs) {
      const record = await store.load(ref);
      expect(record?.scope).toBe(ref.scope);
      expect(new TextDecoder().decode(record?.response?.body ?? undefined)).toBe(JSON.stringify(ref));
    }
  });

  test('every record carries its expiresAtMs as its key expiry (PXAT); a takeover keeps it; a replacement moves it', async () => {
    const store = createRedisStore(opened.client, { prefix });
    const admin = isClusterKind(kind) ? undefined : new Redis(REDIS_URL);
    const expireTime = async (scope: string, key: string) => {
      const name = recordKey(prefix, scope, key);
      if (admin !== undefined) return Number(await admin.call('PEXPIRETIME', name));
      const probe = await openClient('ioredis Cluster');
      try {
        return Number(await (probe.client as Redis).call('PEXPIRETIME', name));
      } finally {
        await probe.close();
      }
    };
    const first = reserveParams('ttl', v7());
    await store.reserve(first);
    expect(await expireTime('ttl', first.key)).toBe(first.expiresAtMs);
    const takeover = {
      ...reserveParams('ttl', first.key, first.leaseUntilMs),
      expiresAtMs: first.expiresAtMs + 5,
    };
    expect(await store.reserve(takeover)).toMatchObject({ outcome: 'reserved', tookOver: true });
    expect(await expireTime('ttl', first.key)).toBe(first.expiresAtMs);
    const replacement = reserveParams('ttl', first.key, first.expiresAtMs);
    expect(await store.reserve(replacement)).toMatchObject({ outcome: 'reserved', tookOver: false });
    expect(await expireTime('ttl', first.key)).toBe(replacement.expiresAtMs);
    admin?.disconnect();
  });

  test('a record given an expiry in the past is gone at once, by Redis; purgeExpired counts nothing', async () => {
    const store = createRedisStore(opened.client, { prefix });
    const params = { ...reserveParams('past'), nowMs: 1_000, leaseUntilMs: 2_000, expiresAtMs: 3_000 };
    expect((await store.reserve(params)).outcome).toBe('reserved');
    expect(await store.load(params)).toBeUndefined();
    expect(await store.purgeExpired({ beforeMs: Date.now(), limit: 100 })).toBe(0);
    await expect(store.purgeExpired({ beforeMs: 0, limit: 0 })).rejects.toThrow(RangeError);
  });

  test('a reserve re-sent by the client after a lost reply is recognised by its owner token, not a duplicate', async () => {
    const store = createRedisStore(opened.client, { prefix });
    const params = reserveParams('resend');
    const first = await store.reserve(params);
    const again = await store.reserve(params);
    expect(again).toEqual(first);
  });

  test('NOSCRIPT after SCRIPT FLUSH mid-run: the script is loaded again (on every node) and every call succeeds', async () => {
    const store = createRedisStore(opened.client, { prefix });
    const flushAll = async () => {
      const nodes = isClusterKind(kind)
        ? (await import('./support/servers.js')).CLUSTER_NODES.map((n) => new Redis(n))
        : [new Redis(REDIS_URL)];
      await Promise.all(nodes.map((node) => node.script('FLUSH').finally(() => node.disconnect())));
    };
    await flushAll();
    const run = async (i: number) => {
      const params = reserveParams('noscript', `k${i}`);
      expect((await store.reserve(params)).outcome).toBe('reserved');
      if (i % 5 === 0) await flushAll();
      expect(await store.finalize({ ...params, nowMs: NOW_MS, response: response(`r${i}`) })).toBe(true);
      expect((await store.reserve(reserveParams('noscript', `k${i}`))).outcome).toBe('exists');
    };
    await Promise.all(Array.from({ length: 40 }, (_, i) => run(i)));
  });

  // (Standalone clients only: their SCRIPT LOAD goes through the one client this test can watch.)
  if (!isClusterKind(kind)) {
    test('NOSCRIPT again after the script was loaded (flushed in between): sent whole with EVAL, the answer stored', async () => {
      const flush = async () => {
        const admin = new Redis(REDIS_URL);
        try {
          await admin.script('FLUSH');
        } finally {
          admin.disconnect();
        }
      };
      // Each SCRIPT LOAD the store sends is undone at once, as a flush from elsewhere right after it would.
      type Send = (...args: unknown[]) => Promise<unknown>;
      const client = opened.client as Record<string, Send>;
      const name = kind === 'ioredis' ? 'script' : 'sendCommand';
      const real = client[name] as Send;
      // Each command as it went out, and the array itself, which must still read so afterwards.
      const sent: { copy: unknown[]; array: unknown[] }[] = [];
      client[name] = async (...args: unknown[]) => {
        const command = (kind === 'ioredis' ? args : args[0]) as unknown[];
        sent.push({ copy: [...command], array: command });
        const reply = await real.apply(client, args);
        if (String(command[0]).toUpperCase() === 'SCRIPT' && String(command[1]).toUpperCase() === 'LOAD') {
          await flush();
        }
        return reply;
      };
      try {
        const store = createRedisStore(opened.client, { prefix });
        const params = reserveParams('eval');
        expect((await store.reserve(params)).outcome).toBe('reserved');
        await flush();
        expect(await store.finalize({ ...params, nowMs: NOW_MS, response: response('by eval') })).toBe(true);
        const found = await store.reserve(reserveParams('eval', params.key));
        expect(found.outcome).toBe('exists');
        expect(Buffer.from(found.record.response?.body ?? []).toString()).toBe('by eval');
        if (kind === 'node-redis') {
          // node-redis is handed the store's own array: the fallback to EVAL never rewrites one already sent.
          const scripts = sent.filter(({ copy }) => copy[0] === 'EVALSHA' || copy[0] === 'EVAL');
          expect(scripts.map(({ copy }) => copy[0])).toEqual(['EVALSHA', 'EVALSHA', 'EVAL']);
          for (const { copy, array } of scripts) expect(array).toEqual(copy);
        }
      } finally {
        client[name] = real;
      }
    });
  }

  test('replicas: count 0 passes; count 1 with no replica fails as a fault within the timeout and frees the key', async () => {
    const none = createRedisStore(opened.client, { prefix, replicas: { count: 0, timeoutMs: 100 } });
    const ok = reserveParams('wait');
    expect((await none.reserve(ok)).outcome).toBe('reserved');
    expect(await none.finalize({ ...ok, nowMs: NOW_MS, response: response('ok') })).toBe(true);

    const one = createRedisStore(opened.client, { prefix, replicas: { count: 1, timeoutMs: 150 } });
    const params = reserveParams('wait');
    const started = performance.now();
    const error = await Promise.resolve(one.reserve(params)).catch((e: unknown) => e);
    const tookMs = performance.now() - started;
    expect(error).toBeInstanceOf(Error);
    expect(isStoreLimitError(error)).toBe(false);
    expect((error as Error).message).toMatch(/acknowledged by 0 of 1 replicas within 150 ms/);
    expect(tookMs).toBeGreaterThanOrEqual(140);
    expect(tookMs).toBeLessThan(2_000);
    expect(await none.load(params)).toBeUndefined(); // released, so the retry is not held up by its own lease

    const held = reserveParams('wait');
    await none.reserve(held);
    await expect(one.finalize({ ...held, nowMs: NOW_MS, response: response('x') })).rejects.toThrow(
      /finalize/,
    );
    await expect(one.release({ ...reserveParams('wait'), owner: 'nobody' })).resolves.toBe(false); // nothing written, nothing waited for
  });
});
