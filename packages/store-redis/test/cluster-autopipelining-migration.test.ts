import { createRedisStore, recordKey } from '@idem/store-redis';
import { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { NOW_MS, reserveParams, response } from './support/params.js';
import { moveSlot, redisServerInstalled, startPrivateCluster } from './support/private-servers.js';

const installed = await redisServerInstalled();
const PORTS = [7311, 7312, 7313];

describe.runIf(installed)('ioredis Cluster enableAutoPipelining: a slot moved during calls', () => {
  let cluster: Awaited<ReturnType<typeof startPrivateCluster>>;
  beforeAll(async () => {
    cluster = await startPrivateCluster(PORTS);
  }, 60_000);
  afterAll(async () => {
    await cluster?.stop();
  });

  test.each([false, true])(
    'enableAutoPipelining %s: ASK, then MOVED, never reach the caller, also in batches with other records of that master',
    async (enableAutoPipelining) => {
      const client = new Cluster(cluster.nodes, { enableAutoPipelining });
      await new Promise((resolve) => client.once('ready', resolve));
      client.on('error', () => {});
      const admin = new Redis({ port: PORTS[0] as number });
      const prefix = `moving:${enableAutoPipelining}:`;
      const store = createRedisStore(client, { prefix });
      try {
        const params = reserveParams('moving');
        await store.reserve(params);
        const name = recordKey(prefix, params.scope, params.key);
        const slot = Number(await admin.cluster('KEYSLOT', name));
        const ranges = (await admin.cluster('SLOTS')) as unknown as [number, number, [string, number]][];
        const [low, high, [, from]] = ranges.find(
          ([a, b]) => slot >= a && slot <= b,
        ) as (typeof ranges)[number];
        const to = PORTS.find((port) => port !== from) as number;
        // Records of other slots of the same master: auto-pipelining batches them with the moving one, and their
        // successful writes are what keeps ioredis from following the redirection for the whole batch.
        const others = [];
        for (let i = 0; others.length < 20; i++) {
          const other = reserveParams('other', `o${i}`);
          const otherSlot = Number(await admin.cluster('KEYSLOT', recordKey(prefix, other.scope, other.key)));
          if (otherSlot !== slot && otherSlot >= low && otherSlot <= high) {
            await store.reserve(other);
            others.push(other);
          }
        }

        let moving = true;
        const errors: unknown[] = [];
        let calls = 0;
        const traffic = (async () => {
          let leaseUntilMs = params.leaseUntilMs;
          while (moving && errors.length <= 10) {
            leaseUntilMs += 1;
            const lease = leaseUntilMs;
            const results = await Promise.allSettled([
              store.renewLease({ ...params, leaseUntilMs: lease }),
              store.load(params),
              ...others.map((other) => store.renewLease({ ...other, leaseUntilMs: lease })),
            ]);
            for (const result of results) {
              calls += 1;
              if (result.status === 'rejected') errors.push(result.reason);
              else if (result.value === false)
                errors.push(new Error('a renewLease of its own record answered false'));
            }
          }
        })();
        await moveSlot(slot, name, from, to, PORTS);
        moving = false;
        await traffic;

        expect(calls).toBeGreaterThan(0);
        expect(errors.map(String)).toEqual([]);
        expect(await store.finalize({ ...params, nowMs: NOW_MS, response: response('moved') })).toBe(true);
        const again = await store.reserve(reserveParams('moving', params.key));
        expect(
          again.outcome === 'exists' && new TextDecoder().decode(again.record.response?.body ?? undefined),
        ).toBe('moved');
      } finally {
        admin.disconnect();
        client.disconnect();
      }
    },
  );
});
