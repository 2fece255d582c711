import { randomBytes } from 'node:crypto';
import { createRedisStore, type RedisStoreOptions, recordKey } from '@idem/store-redis';
import { Cluster, Redis } from 'ioredis';
import { createClient, createCluster } from 'redis';
import { v7 } from 'uuid';
import { describe, expect, test } from 'vitest';
import { NOW_MS, reserveParams, response } from './support/params.js';
import {
  CLUSTER_NODES,
  type ClientKind,
  clusterUp,
  isClusterKind,
  REDIS_URL,
  redisUp,
  type TestClient,
  uniquePrefix,
} from './support/servers.js';

const standalone = await redisUp();
const cluster = await clusterUp();

/** A node-redis client of `kind` whose own `keyPrefix` is `keyPrefix`, connected. */
async function openWithKeyPrefix(kind: ClientKind, keyPrefix: string | Buffer): Promise<TestClient> {
  const client =
    kind === 'node-redis cluster'
      ? createCluster({
          rootNodes: CLUSTER_NODES.map(({ host, port }) => ({ url: `redis://${host}:${port}` })),
          keyPrefix,
        })
      : createClient({ url: REDIS_URL, keyPrefix });
  client.on('error', () => {});
  await client.connect();
  return { client, close: async () => client.destroy() };
}

/** Plain ioredis clients (no keyPrefix) on the server, or on every node of the cluster. */
const plainNodes = (kind: ClientKind) =>
  isClusterKind(kind) ? CLUSTER_NODES.map((node) => new Redis(node)) : [new Redis(REDIS_URL)];

/** Every raw key name holding `part`, as bytes, as a client without any prefix sees them. */
async function rawNames(kind: ClientKind, part: string): Promise<Buffer[]> {
  const nodes = plainNodes(kind);
  try {
    const found = await Promise.all(nodes.map((node) => node.keysBuffer(`*${part}*`)));
    return found.flat().sort(Buffer.compare);
  } finally {
    for (const node of nodes) node.disconnect();
  }
}

/** Delete every key holding `part` (wherever a keyPrefix put it), one by one (no CROSSSLOT). */
async function sweepHolding(kind: ClientKind, part: string): Promise<void> {
  const nodes = plainNodes(kind);
  try {
    await Promise.all(
      nodes.map(async (node) => {
        for (const name of await node.keysBuffer(`*${part}*`)) await node.unlink(name);
      }),
    );
  } finally {
    for (const node of nodes) node.disconnect();
  }
}

/** The raw value of `name`, read by a client without any prefix. */
async function rawGet(kind: ClientKind, name: Buffer): Promise<Buffer | null> {
  const client = isClusterKind(kind) ? new Cluster(CLUSTER_NODES) : new Redis(REDIS_URL);
  try {
    return await client.getBuffer(name);
  } finally {
    client.disconnect();
  }
}

const kinds: readonly { kind: ClientKind; up: boolean; options: RedisStoreOptions }[] = [
  { kind: 'node-redis', up: standalone, options: {} },
  // `replicas` sends each write with its WAIT on the node's own client (the cluster's `writeAndWait`): the same
  // key, by another path. The shared cluster has no replicas, so count 0 (WAIT 0 answers at once).
  { kind: 'node-redis', up: standalone, options: { replicas: { count: 0, timeoutMs: 1_000 } } },
  { kind: 'node-redis cluster', up: cluster, options: {} },
  { kind: 'node-redis cluster', up: cluster, options: { replicas: { count: 0, timeoutMs: 1_000 } } },
];

describe.each(
  kinds.map((each) => [`${each.kind}${each.options.replicas ? ' with replicas' : ''}`, each] as const),
)('%s keyPrefix', (_, { kind, up, options }) => {
  test.runIf(up)(
    "two clients whose keyPrefix differs never see each other's records under the same store prefix",
    async () => {
      const run = randomBytes(4).toString('hex');
      const keyPrefixes = [`app-a-${run}:`, `app-b-${run}:`] as const;
      const prefix = uniquePrefix();
      const [a, b] = await Promise.all(keyPrefixes.map((keyPrefix) => openWithKeyPrefix(kind, keyPrefix)));
      try {
        const storeA = createRedisStore((a as TestClient).client, { ...options, prefix });
        const storeB = createRedisStore((b as TestClient).client, { ...options, prefix });
        const paramsA = reserveParams('tenant', v7());
        const paramsB = reserveParams('tenant', paramsA.key);
        const name = recordKey(prefix, paramsA.scope, paramsA.key);

        expect((await storeA.reserve(paramsA)).outcome).toBe('reserved');
        // App B's key is its own: reserved, not A's record found (which would replay A's answer to B).
        expect((await storeB.reserve(paramsB)).outcome).toBe('reserved');
        expect(await rawNames(kind, prefix)).toEqual(
          keyPrefixes.map((keyPrefix) => Buffer.from(`${keyPrefix}${name}`)),
        );

        expect(await storeA.finalize({ ...paramsA, nowMs: NOW_MS, response: response('a') })).toBe(true);
        const atA = await rawGet(kind, Buffer.from(`${keyPrefixes[0]}${name}`));
        expect(atA?.subarray(0, 1).toString()).toBe('c'); // the script completed the prefixed key
        expect((await storeB.load(paramsB))?.response).toBeNull();
        expect(await storeB.finalize({ ...paramsB, nowMs: NOW_MS, response: response('b') })).toBe(true);
        expect(new TextDecoder().decode((await storeA.load(paramsA))?.response?.body ?? undefined)).toBe('a');
        expect(new TextDecoder().decode((await storeB.load(paramsB))?.response?.body ?? undefined)).toBe('b');

        // list and stats see each client's records only, by the names under its own keyPrefix.
        const other = reserveParams('tenant', v7());
        expect((await storeB.reserve(other)).outcome).toBe('reserved');
        const listedA = await storeA.list({ limit: 10, nowMs: NOW_MS });
        expect(listedA.records.map((record) => record.key)).toEqual([paramsA.key]);
        const listedB = await storeB.list({ limit: 10, nowMs: NOW_MS, bodies: true });
        expect(listedB.records.map((record) => record.key).sort()).toEqual([paramsA.key, other.key].sort());
        expect(await storeA.stats({ nowMs: NOW_MS })).toMatchObject({ completed: 1, inFlight: 0 });
        expect(await storeB.stats({ nowMs: NOW_MS })).toMatchObject({ completed: 1, inFlight: 1 });

        // release (the script's DEL) and forget (DEL) remove B's records, never A's.
        expect(await storeB.release(other)).toBe(true);
        expect(await storeB.forget(paramsB)).toBe(true);
        expect(await rawNames(kind, prefix)).toEqual([Buffer.from(`${keyPrefixes[0]}${name}`)]);
        expect(await storeB.forget(paramsB)).toBe(false);
        expect((await storeA.load(paramsA))?.response?.status).toBe(201);
      } finally {
        await Promise.all([a, b].map((each) => each?.close()));
        await sweepHolding(kind, prefix);
      }
    },
  );

  test.runIf(up)('a Buffer keyPrefix is put before every key as its bytes', async () => {
    // Not UTF-8 (0xfe), so that a string round trip would show.
    const keyPrefix = Buffer.from([0x62, 0xfe, 0x3a]);
    const prefix = uniquePrefix();
    const opened = await openWithKeyPrefix(kind, keyPrefix);
    try {
      const store = createRedisStore(opened.client, { ...options, prefix });
      const params = reserveParams('tenant', v7());
      expect((await store.reserve(params)).outcome).toBe('reserved');
      expect(await store.finalize({ ...params, nowMs: NOW_MS, response: response('x') })).toBe(true);
      const name = Buffer.concat([keyPrefix, Buffer.from(recordKey(prefix, params.scope, params.key))]);
      expect(await rawNames(kind, prefix)).toEqual([name]);
      expect((await rawGet(kind, name))?.subarray(0, 1).toString()).toBe('c');
      expect((await store.list({ limit: 10, nowMs: NOW_MS })).records.map((record) => record.key)).toEqual([
        params.key,
      ]);
      expect(await store.stats({ nowMs: NOW_MS })).toMatchObject({ completed: 1, inFlight: 0 });
      expect(await store.forget(params)).toBe(true);
      expect(await rawNames(kind, prefix)).toEqual([]);
    } finally {
      await opened.close();
      await sweepHolding(kind, prefix);
    }
  });
});
