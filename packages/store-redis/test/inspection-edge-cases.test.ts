import { createRedisStore } from '@idem/store-redis';
import { Cluster, Redis } from 'ioredis';
import { createClient } from 'redis';
import { describe, expect, test } from 'vitest';
import {
  type ClientVariant,
  ioredisClusterVariant,
  ioredisVariant,
  nodeRedisClusterVariant,
  nodeRedisVariant,
} from './support/client-options.js';
import {
  cursorParts,
  expectExactlyOnce,
  idOf,
  inspectable,
  listAll,
  seed,
  sweepLiteral,
} from './support/inspection.js';
import { NOW_MS, reserveParams } from './support/params.js';
import {
  CLUSTER_NODES,
  type ClientKind,
  clusterUp,
  isClusterKind,
  REDIS_URL,
  redisUp,
  uniquePrefix,
} from './support/servers.js';

const standalone = await redisUp();
const cluster = await clusterUp();

/** A raw client of `kind`'s servers, with no prefix of any kind. */
const rawClient = (kind: ClientKind) =>
  isClusterKind(kind) ? new Cluster(CLUSTER_NODES) : new Redis(REDIS_URL);

const plainVariants: ClientVariant[] = [
  ...(standalone ? [ioredisVariant('default'), nodeRedisVariant('RESP3', { RESP: 3 })] : []),
  ...(cluster ? [ioredisClusterVariant('default'), nodeRedisClusterVariant('RESP3', 3)] : []),
];

describe.each(plainVariants.map((variant) => [variant.name, variant] as const))('%s', (_, variant) => {
  test('a key under the prefix shaped like a record but not one fails list and stats, naming it; other keys under the prefix are ignored', async () => {
    const opened = await variant.open();
    const raw = rawClient(variant.kind);
    const prefix = uniquePrefix();
    try {
      const store = inspectable(createRedisStore(opened.client, { prefix }));
      const made = await seed(store, 's', 3);
      // Not shaped like a record (no `{` right after the prefix, or no closing brace): never matched.
      for (const name of [`${prefix}other`, `${prefix}{x`, `${prefix}x{a:b}`, `${prefix}`])
        await raw.set(name, 'x');
      expectExactlyOnce((await listAll(store, { limit: 2 })).records, made);
      const foreign: [string, () => Promise<unknown>][] = [
        [`${prefix}{no-colon}`, () => raw.set(`${prefix}{no-colon}`, 'x')],
        [`${prefix}{%41:b}`, () => raw.set(`${prefix}{%41:b}`, 'x')], // a spelling the store never writes
        [`${prefix}{a:b}`, () => raw.set(`${prefix}{a:b}`, 'garbage')],
        [`${prefix}{a:c}`, () => raw.hset(`${prefix}{a:c}`, 'f', 'v')],
        [`${prefix}{a:d}`, () => raw.set(`${prefix}{a:d}`, `i${'9'.repeat(60)}`)],
      ];
      for (const [name, write] of foreign) {
        await write();
        const named = new RegExp(
          `${JSON.stringify(name).replace(/[{}[\]\\^$.*+?()|]/g, '\\$&')}.*not one of its records`,
        );
        await expect(listAll(store, { limit: 1000 }), name).rejects.toThrow(named);
        await expect(listAll(store, { limit: 1000, bodies: true }), name).rejects.toThrow(named);
        await expect(store.stats({ nowMs: NOW_MS }), name).rejects.toThrow(named);
        await raw.del(name);
      }
      expectExactlyOnce((await listAll(store, { limit: 1000 })).records, made);
    } finally {
      raw.disconnect();
      await opened.close();
      await sweepLiteral(variant.kind, prefix);
    }
  });

  test('a listing while records are added and forgotten: every record present throughout is listed, nothing never written', async () => {
    const opened = await variant.open();
    const prefix = uniquePrefix();
    try {
      const store = inspectable(createRedisStore(opened.client, { prefix }));
      const stay = await seed(store, 'stay', 150);
      const churn = await seed(store, 'churn', 100);
      const added: ReturnType<typeof reserveParams>[] = [];
      const writer = (async () => {
        for (let i = 0; i < 100; i++) {
          const params = reserveParams(i % 2 === 0 ? 'stay' : 'new', `added-${i}`);
          added.push(params);
          await store.reserve(params);
          await store.forget(churn[i] as (typeof churn)[number]);
        }
      })();
      const listing = listAll(store, { limit: 7 });
      const [{ records }] = await Promise.all([listing, writer]);
      const listed = new Set(records.map(idOf));
      for (const params of stay) expect(listed.has(idOf(params)), idOf(params)).toBe(true);
      const written = new Set([...stay, ...churn, ...added].map(idOf));
      for (const record of records) expect(written.has(idOf(record)), idOf(record)).toBe(true);
      // And once it is quiet, a listing holds exactly what is there.
      expectExactlyOnce((await listAll(store, { limit: 50 })).records, [...stay, ...added]);
    } finally {
      await opened.close();
      await sweepLiteral(variant.kind, prefix);
    }
  });
});

const largeVariants: ClientVariant[] = [
  ...(standalone ? [ioredisVariant('default')] : []),
  ...(cluster ? [nodeRedisClusterVariant('RESP2', 2)] : []),
];

describe.each(largeVariants.map((variant) => [variant.name, variant] as const))('%s', (_, variant) => {
  test('3,000 records among 5,000 other keys: small pages keep a small cursor, full passes list each record once', async () => {
    const opened = await variant.open();
    const raw = rawClient(variant.kind);
    const prefix = uniquePrefix();
    try {
      const store = inspectable(createRedisStore(opened.client, { prefix: `${prefix}s:` }));
      const made = await seed(store, 'big', 3_000, 250);
      // Keys of another application beside them, which SCAN walks past.
      for (let from = 0; from < 5_000; from += 500) {
        await Promise.all(
          Array.from({ length: 500 }, (_, i) => raw.set(`${prefix}noise:{${from + i}}`, 'x')),
        );
      }
      let cursor: string | undefined;
      let longest = 0;
      for (let page = 0; page < 40; page++) {
        const result = await store.list({
          limit: 1,
          nowMs: NOW_MS,
          ...(cursor === undefined ? {} : { cursor }),
        });
        expect(result.records).toHaveLength(1);
        cursor = result.cursor as string;
        longest = Math.max(longest, cursor.length);
        // A page of one scans with a COUNT of at most 128, so its cursor carries about that many names at most.
        expect((cursorParts(cursor)[5] as string[]).length).toBeLessThanOrEqual(160);
      }
      expect(longest).toBeLessThan(8_000);

      const full = await listAll(store, { limit: 1_000 });
      expectExactlyOnce(full.records, made);
      expect(full.pages).toBe(3);
      if (!isClusterKind(variant.kind)) expectExactlyOnce((await listAll(store, { limit: 7 })).records, made);
      expect(await store.stats({ nowMs: NOW_MS })).toMatchObject({ inFlight: 1_500, completed: 1_500 });
      expect((await listAll(store, { limit: 1_000, state: 'completed' })).records).toHaveLength(1_500);
    } finally {
      raw.disconnect();
      await opened.close();
      await sweepLiteral(variant.kind, prefix);
    }
  }, 60_000);

  test('a client dropped in the middle of a listing or of stats: the call fails, never hangs', async () => {
    const prefix = uniquePrefix();
    try {
      for (const call of ['list', 'stats'] as const) {
        const opened = await variant.open();
        const store = inspectable(createRedisStore(opened.client, { prefix }));
        if (call === 'list') await seed(store, 's', 400, 200);
        const started = performance.now();
        const running =
          call === 'list' ? listAll(store, { limit: 1_000, bodies: true }) : store.stats({ nowMs: NOW_MS });
        // Once its first SCAN is on the wire: the connection drops under the scan or the reads that follow.
        await new Promise((resolve) => setImmediate(resolve));
        const client = opened.client as { disconnect?: () => void; destroy?: () => void };
        if (client.disconnect !== undefined) client.disconnect();
        else client.destroy?.();
        await expect(running).rejects.toThrow();
        expect(performance.now() - started).toBeLessThan(2_000);
      }
    } finally {
      await sweepLiteral(variant.kind, prefix);
    }
  });
});

describe.runIf(standalone && cluster)('ioredis keyPrefix', () => {
  test.each([
    ['ioredis', "'app:'", 'app:'],
    // A Buffer, with glob characters. (ioredis 6 cannot send one that is not UTF-8: its SET fails with a
    // protocol error before the store is involved.)
    ['ioredis', "Buffer 'b*[?]:'", Buffer.from('b*[?]:')],
    ['ioredis Cluster', "'app:'", 'app:'],
  ] as const)(
    '%s with keyPrefix %s: the records are those of a plain client under keyPrefix + prefix',
    async (kind, _, keyPrefix) => {
      const prefix = uniquePrefix();
      const open = (options: { keyPrefix?: string }) =>
        kind === 'ioredis' ? new Redis(REDIS_URL, options) : new Cluster(CLUSTER_NODES, options);
      const prefixed = open({ keyPrefix: keyPrefix as string });
      const plain = open({});
      const rawPrefix = Buffer.concat([Buffer.from(keyPrefix), Buffer.from(prefix)]);
      try {
        const store = inspectable(createRedisStore(prefixed, { prefix }));
        const made = await seed(store, 's', 20);
        expectExactlyOnce((await listAll(store, { limit: 3 })).records, made);
        expect(await store.stats({ nowMs: NOW_MS })).toMatchObject({ inFlight: 10, completed: 10 });
        // A plain client sees nothing of them under the bare prefix …
        expect(
          (await listAll(inspectable(createRedisStore(plain, { prefix })), { limit: 100 })).records,
        ).toEqual([]);
        // … and the same records under keyPrefix + prefix, which it can forget.
        const same = inspectable(createRedisStore(plain, { prefix: rawPrefix.toString() }));
        expectExactlyOnce((await listAll(same, { limit: 7 })).records, made);
        expect(await same.forget(made[0] as (typeof made)[number])).toBe(true);
        expect(await store.load(made[0] as (typeof made)[number])).toBeUndefined();
      } finally {
        prefixed.disconnect();
        plain.disconnect();
        await sweepLiteral(kind, rawPrefix);
      }
    },
  );
});

describe.runIf(standalone && cluster)('clients not connected yet, and one left inside MULTI', () => {
  test.each(['ioredis', 'ioredis Cluster'] as const)(
    '%s lazyConnect: list, as the first call, connects the client',
    async (kind) => {
      const client =
        kind === 'ioredis'
          ? new Redis(REDIS_URL, { lazyConnect: true })
          : new Cluster(CLUSTER_NODES, { lazyConnect: true });
      const prefix = uniquePrefix();
      try {
        expect(client.status).toBe('wait');
        const store = inspectable(createRedisStore(client, { prefix }));
        expect(await store.list({ limit: 5, nowMs: NOW_MS })).toEqual({ records: [], cursor: null });
        const made = await seed(store, 's', 4);
        expectExactlyOnce((await listAll(store, { limit: 1 })).records, made);
      } finally {
        client.disconnect();
        await sweepLiteral(kind, prefix);
      }
    },
  );

  test.each(['list', 'stats'] as const)(
    'ioredis Cluster enableOfflineQueue false, not connected: %s fails at once',
    async (method) => {
      // A client of its own per method: the first call starts the lazy connection, and a second call on the
      // same client may find it connected by then (a race on a loaded machine, not what is tested here).
      const client = new Cluster(CLUSTER_NODES, { enableOfflineQueue: false, lazyConnect: true });
      try {
        const store = inspectable(createRedisStore(client, { prefix: uniquePrefix() }));
        const started = performance.now();
        const call =
          method === 'list' ? store.list({ limit: 5, nowMs: NOW_MS }) : store.stats({ nowMs: NOW_MS });
        await expect(call).rejects.toThrow();
        expect(performance.now() - started).toBeLessThan(2_000);
      } finally {
        client.disconnect();
      }
    },
  );

  test('a client left inside MULTI: list and stats fail naming the MULTI, and work after DISCARD', async () => {
    const ioredis = new Redis(REDIS_URL);
    const nodeRedis = await createClient({ url: REDIS_URL }).connect();
    const prefix = uniquePrefix();
    try {
      for (const [client, open, discard] of [
        [ioredis, () => ioredis.multi({ pipeline: false }), () => ioredis.discard()],
        [nodeRedis, () => nodeRedis.sendCommand(['MULTI']), () => nodeRedis.sendCommand(['DISCARD'])],
      ] as const) {
        const store = inspectable(createRedisStore(client, { prefix }));
        await seed(store, 's', 2);
        await open();
        await expect(store.list({ limit: 5, nowMs: NOW_MS })).rejects.toThrow(
          /queued in a MULTI transaction/,
        );
        await expect(store.stats({ nowMs: NOW_MS })).rejects.toThrow(/queued in a MULTI transaction/);
        await expect(store.forget({ scope: 's', key: 'k' })).rejects.toThrow(/queued in a MULTI transaction/);
        await discard();
        expect((await listAll(store, { limit: 5 })).records.length).toBeGreaterThanOrEqual(2);
      }
    } finally {
      ioredis.disconnect();
      nodeRedis.destroy();
      await sweepLiteral('ioredis', prefix);
    }
  });
});

describe.runIf(standalone)('forget with replicas the server does not have', () => {
  test('replicas: { count: 1 } without a replica: forget of a record fails as a fault (the DEL may not survive a failover); of none, false', async () => {
    const client = new Redis(REDIS_URL);
    const prefix = uniquePrefix();
    try {
      const store = inspectable(createRedisStore(client, { prefix, replicas: { count: 1, timeoutMs: 50 } }));
      const plain = inspectable(createRedisStore(client, { prefix }));
      const params = reserveParams('s', 'k');
      await plain.reserve(params);
      await expect(store.forget(params)).rejects.toThrow(/forget was acknowledged by 0 of 1 replicas/);
      expect(await store.forget(params)).toBe(false);
    } finally {
      client.disconnect();
      await sweepLiteral('ioredis', prefix);
    }
  });
});
