import { createIdempotency } from '@idem/core';
import { storeConformance } from '@idem/store-conformance';
import { createRedisStore, recordKey } from '@idem/store-redis';
import { Cluster, Redis } from 'ioredis';
import { createClient, createCluster } from 'redis';
import { v7 } from 'uuid';
import { describe, expect, test } from 'vitest';
import {
  type ClientVariant,
  ioredisClusterVariant,
  ioredisVariant,
  keysMatching,
  nodeRedisClusterVariant,
  nodeRedisVariant,
  request,
  variantStoreFactory,
} from './support/client-options.js';
import { NOW_MS, reserveParams, response } from './support/params.js';
import {
  CLUSTER_NODES,
  clusterUp,
  isClusterKind,
  KIT_OPTIONS,
  REDIS_URL,
  redisUp,
  sweep,
  uniquePrefix,
} from './support/servers.js';

const standalone = await redisUp();
const cluster = await clusterUp();

/**
 * Every client construction a user would plausibly write, each run through the whole conformance kit (it takes
 * well under a second per variant) and a keyed request through the coordinator. ioredis 6 speaks RESP3 unless
 * told `protocol: 2`.
 */
const variants: ClientVariant[] = [
  ...(standalone
    ? [
        ioredisVariant('default (RESP3)'),
        ioredisVariant('protocol 2', { protocol: 2 }),
        ioredisVariant('enableAutoPipelining', { enableAutoPipelining: true }),
        ioredisVariant("keyPrefix 'app:'", { keyPrefix: 'app:' }),
        ioredisVariant("keyPrefix 'app:' and enableAutoPipelining", {
          keyPrefix: 'app:',
          enableAutoPipelining: true,
        }),
        ioredisVariant('enableOfflineQueue false', { enableOfflineQueue: false }),
        ioredisVariant('stringNumbers', { stringNumbers: true }),
        nodeRedisVariant('RESP2', { RESP: 2 }),
        nodeRedisVariant('RESP3', { RESP: 3 }),
        nodeRedisVariant('disableOfflineQueue', { disableOfflineQueue: true }),
        nodeRedisVariant("keyPrefix 'app:'", { keyPrefix: 'app:' }),
      ]
    : []),
  ...(cluster
    ? [
        ioredisClusterVariant('default'),
        ioredisClusterVariant('enableAutoPipelining', { enableAutoPipelining: true }),
        ioredisClusterVariant("keyPrefix 'app:'", { keyPrefix: 'app:' }),
        ioredisClusterVariant("keyPrefix 'app:' and enableAutoPipelining", {
          keyPrefix: 'app:',
          enableAutoPipelining: true,
        }),
        ioredisClusterVariant("scaleReads 'slave'", { scaleReads: 'slave' }),
        nodeRedisClusterVariant('RESP2', 2),
        nodeRedisClusterVariant('RESP3', 3),
        nodeRedisClusterVariant("keyPrefix 'app:'", 3, { keyPrefix: 'app:' }),
      ]
    : []),
];

describe.each(variants.map((variant) => [variant.name, variant] as const))('%s', (_, variant) => {
  storeConformance({ describe, test }, variantStoreFactory(variant), KIT_OPTIONS);

  test('a keyed request through the coordinator executes once and its retry replays (failMode open)', async () => {
    const opened = await variant.open();
    const prefix = uniquePrefix();
    try {
      const idem = createIdempotency({
        store: createRedisStore(opened.client, { prefix }),
        failMode: 'open',
        heartbeatIntervalMs: false,
      });
      const key = v7();
      let runs = 0;
      const call = async () => {
        const result = await idem.begin(request(key));
        if (result.action === 'replay') return { replayed: true, body: result.response.body };
        if (result.action !== 'execute') throw new Error(`expected execute, got ${result.action}`);
        runs += 1;
        const body = JSON.stringify({ id: 42 });
        await result.execution.finish({ status: 201, headers: { 'content-type': 'application/json' }, body });
        return { replayed: false, body: new TextEncoder().encode(body) };
      };
      const first = await call();
      const retry = await call();
      expect(first.replayed).toBe(false);
      expect(retry.replayed).toBe(true);
      expect(new TextDecoder().decode(retry.body ?? undefined)).toBe('{"id":42}');
      expect(runs).toBe(1);
    } finally {
      await opened.close();
      await sweep(variant.kind, `${variant.keyPrefix}${prefix}`);
    }
  });

  test('records land under the client keyPrefix and the store prefix, and the scripts address that key', async () => {
    const opened = await variant.open();
    const prefix = uniquePrefix();
    const raw = isClusterKind(variant.kind) ? undefined : new Redis(REDIS_URL);
    try {
      const store = createRedisStore(opened.client, { prefix });
      const params = reserveParams('tenant', v7());
      const name = `${variant.keyPrefix}${recordKey(prefix, params.scope, params.key)}`;
      expect((await store.reserve(params)).outcome).toBe('reserved');
      expect(await keysMatching(variant.kind, `*${prefix}*`)).toEqual([name]);
      // finalize is the script: it must have completed that very key ('c'), not written another one.
      expect(await store.finalize({ ...params, nowMs: NOW_MS, response: response('done') })).toBe(true);
      expect(await keysMatching(variant.kind, `*${prefix}*`)).toEqual([name]);
      const value = raw === undefined ? await clusterGet(name) : await raw.getBuffer(name);
      expect(value?.subarray(0, 1).toString()).toBe('c');
      expect((await store.load(params))?.response?.status).toBe(201);
      // release (the script's DEL) of a second record removes it, under the same key layout.
      const other = reserveParams('tenant', v7());
      await store.reserve(other);
      expect(await keysMatching(variant.kind, `*${prefix}*`)).toHaveLength(2);
      expect(await store.release(other)).toBe(true);
      expect(await keysMatching(variant.kind, `*${prefix}*`)).toEqual([name]);
    } finally {
      raw?.disconnect();
      await opened.close();
      await sweep(variant.kind, `${variant.keyPrefix}${prefix}`);
    }
  });
});

/** The raw value of `name`, read from the shared cluster by a client without any prefix. */
async function clusterGet(name: string): Promise<Buffer | null> {
  const probe = new Cluster(CLUSTER_NODES);
  try {
    return await probe.getBuffer(name);
  } finally {
    probe.disconnect();
  }
}

describe('client options refused at createRedisStore', () => {
  test('an ioredis keyPrefix with a brace is a TypeError saying why (it would be every record hash tag)', () => {
    for (const keyPrefix of ['{app}:', 'a{', Buffer.from('}')]) {
      const client = new Redis({ lazyConnect: true, keyPrefix: keyPrefix as string });
      expect(() => createRedisStore(client)).toThrow(TypeError);
      expect(() => createRedisStore(client)).toThrow(/keyPrefix .* brace.*hash tag/);
      client.disconnect();
    }
    const fine = new Redis({ lazyConnect: true, keyPrefix: 'app:' });
    expect(createRedisStore(fine).client).toBe('ioredis');
    fine.disconnect();
  });

  test('a node-redis keyPrefix with a brace is the same TypeError, on createClient and createCluster', () => {
    const rootNodes = CLUSTER_NODES.map(({ host, port }) => ({ url: `redis://${host}:${port}` }));
    for (const keyPrefix of ['{app}:', 'a{', Buffer.from('}')]) {
      // Never connected: the store refuses the client before it sends anything.
      for (const client of [createClient({ keyPrefix }), createCluster({ rootNodes, keyPrefix })]) {
        expect(() => createRedisStore(client)).toThrow(TypeError);
        expect(() => createRedisStore(client)).toThrow(/node-redis keyPrefix .* brace.*hash tag/);
      }
    }
    expect(createRedisStore(createClient({ keyPrefix: 'app:' })).client).toBe('node-redis');
    expect(createRedisStore(createCluster({ rootNodes, keyPrefix: 'app:' })).client).toBe(
      'node-redis cluster',
    );
  });
});
