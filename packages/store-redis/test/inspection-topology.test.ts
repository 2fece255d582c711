import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { ReserveParams } from '@idem/core';
import { createRedisStore, recordKey } from '@idem/store-redis';
import { Cluster, Redis } from 'ioredis';
import { createCluster } from 'redis';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  cursorOf,
  cursorParts,
  expectExactlyOnce,
  inspectable,
  listAll,
  seed,
} from './support/inspection.js';
import { NOW_MS } from './support/params.js';
import { moveSlot, redisServerInstalled, startPrivateCluster, until } from './support/private-servers.js';
import { uniquePrefix } from './support/servers.js';

const run = promisify(execFile);
const installed = await redisServerInstalled();

/** Three masters with all the slots, and a fourth that joins with none (ports of this file's own). */
const PORTS = [7401, 7402, 7403];
const EMPTY = 7404;
const ALL = [...PORTS, EMPTY];

const admin = (port: number) => {
  const client = new Redis({ port, retryStrategy: () => null, maxRetriesPerRequest: 0 });
  client.on('error', () => {});
  return client;
};

async function ask<T>(port: number, call: (client: Redis) => Promise<T>): Promise<T> {
  const client = admin(port);
  try {
    return await call(client);
  } finally {
    client.disconnect();
  }
}

/** The port of the master serving `name`'s slot, and that slot. */
async function ownerOf(name: string): Promise<{ port: number; slot: number }> {
  const slot = Number(await ask(PORTS[0] as number, (c) => c.cluster('KEYSLOT', name)));
  const ranges = (await ask(PORTS[0] as number, (c) => c.cluster('SLOTS'))) as unknown as [
    number,
    number,
    [string, number],
  ][];
  const range = ranges.find(([from, to]) => from <= slot && slot <= to);
  if (range === undefined) throw new Error(`no master serves slot ${slot}`);
  return { port: range[2][1], slot };
}

/** A record alone in its slot (so that the slot can move with it), and where it is. */
async function loneRecord(prefix: string, records: readonly ReserveParams[], on?: number) {
  for (const params of records) {
    const name = recordKey(prefix, params.scope, params.key);
    const owner = await ownerOf(name);
    if (on !== undefined && owner.port !== on) continue;
    const inSlot = Number(await ask(owner.port, (c) => c.cluster('COUNTKEYSINSLOT', owner.slot)));
    if (inSlot === 1) return { params, name, ...owner };
  }
  throw new Error('no record alone in its slot');
}

const openIoredis = async () => {
  const client = new Cluster(PORTS.map((port) => ({ host: '127.0.0.1', port })));
  await new Promise<void>((resolve, reject) => {
    client.once('ready', resolve);
    client.once('error', reject);
  });
  return { client, close: async () => client.disconnect() };
};
const openNodeRedis = async () => {
  const client = createCluster({ rootNodes: PORTS.map((port) => ({ url: `redis://127.0.0.1:${port}` })) });
  client.on('error', () => {});
  await client.connect();
  return { client, close: async () => client.destroy() };
};
const CLIENTS = [
  ['ioredis Cluster', openIoredis],
  ['node-redis cluster', openNodeRedis],
] as const;

describe.runIf(installed)(
  'a Cluster whose masters change: an empty one, slots moved, a master removed',
  () => {
    let cluster: Awaited<ReturnType<typeof startPrivateCluster>>;
    let emptyNode: ChildProcess | undefined;
    const dir = mkdtempSync(join(tmpdir(), 'idem-inspection-cluster-'));

    beforeAll(async () => {
      await ask(EMPTY, (c) => c.call('SHUTDOWN', 'NOSAVE')).catch(() => {}); // left by a crashed run
      cluster = await startPrivateCluster(PORTS);
      emptyNode = spawn(
        'redis-server',
        [
          ...[
            '--port',
            String(EMPTY),
            '--bind',
            '127.0.0.1',
            '--dir',
            dir,
            '--save',
            '',
            '--appendonly',
            'no',
          ],
          ...['--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf'],
        ],
        { stdio: 'ignore' },
      );
      await until('the fourth node to answer', async () => (await ask(EMPTY, (c) => c.ping())) === 'PONG');
      await run('redis-cli', ['--cluster', 'add-node', `127.0.0.1:${EMPTY}`, `127.0.0.1:${PORTS[0]}`]);
      await until('every node to know the four masters, the cluster ok', async () => {
        const infos = await Promise.all(ALL.map((port) => ask(port, (c) => c.cluster('INFO'))));
        return infos.every(
          (info) => /cluster_state:ok/.test(String(info)) && /cluster_known_nodes:4/.test(String(info)),
        );
      });
    }, 90_000);

    afterAll(async () => {
      emptyNode?.kill('SIGKILL');
      await cluster?.stop();
      rmSync(dir, { recursive: true, force: true });
    });

    test.each(CLIENTS)(
      '%s: a master with no slots changes nothing; every record is listed once and counted',
      async (_, open) => {
        const opened = await open();
        try {
          const store = inspectable(createRedisStore(opened.client, { prefix: uniquePrefix() }));
          const made = await seed(store, 's', 12);
          for (const limit of [1, 5, 1000])
            expectExactlyOnce((await listAll(store, { limit })).records, made);
          expect(await store.stats({ nowMs: NOW_MS })).toMatchObject({ inFlight: 6, completed: 6 });
        } finally {
          await opened.close();
        }
      },
    );

    test.each(CLIENTS)(
      '%s: slots moved to another master between pages: the next page says to list again; a new listing lists every record',
      async (_, open) => {
        const opened = await open();
        const prefix = uniquePrefix();
        try {
          const store = inspectable(createRedisStore(opened.client, { prefix }));
          const made = await seed(store, 's', 20);
          const first = await store.list({ limit: 1, nowMs: NOW_MS });
          const moved = await loneRecord(prefix, made);
          const to = PORTS.find((port) => port !== moved.port) as number;
          await moveSlot(moved.slot, moved.name, moved.port, to, ALL);
          // A client that learnt the new slot map, as an operator's next command would be.
          const fresh = await open();
          try {
            const again = inspectable(createRedisStore(fresh.client, { prefix }));
            await expect(
              again.list({ limit: 1, nowMs: NOW_MS, cursor: first.cursor as string }),
            ).rejects.toThrow(/slots of the Cluster moved .* list again from the start, without a cursor/);
            expectExactlyOnce((await listAll(again, { limit: 3 })).records, made);
          } finally {
            await fresh.close();
          }
          await moveSlot(moved.slot, moved.name, to, moved.port, ALL);
        } finally {
          await opened.close();
        }
      },
    );

    // Last: it takes the fourth master out of the cluster.
    test('ioredis Cluster: the master a cursor is scanning leaves the Cluster: the next page says to list again', async () => {
      // Only this test's records on the masters, few enough that one SCAN call (COUNT 16 at least) takes all
      // of a master's names, and two or more left on the third master once one has moved: a page of one that
      // scans the third master then keeps what it has no room for, and its cursor stands on the fourth, not
      // begun. With other tests' keys around, the third master's last batch could hold one record or none, and
      // the same page would go on to scan the fourth.
      await Promise.all(ALL.map((port) => ask(port, (c) => c.flushall())));
      const opened = await openIoredis();
      const prefix = uniquePrefix();
      try {
        const store = inspectable(createRedisStore(opened.client, { prefix }));
        const made = await seed(store, 's', 18);
        const onThird = async () => {
          const owners = await Promise.all(made.map((p) => ownerOf(recordKey(prefix, p.scope, p.key))));
          return owners.filter((owner) => owner.port === PORTS[2]).length;
        };
        while ((await onThird()) < 3) made.push(...(await seed(store, 's', 1)));
        // Give the empty master one record's slot, and page until the cursor stands on it.
        const moving = await loneRecord(prefix, made, PORTS[2]);
        await moveSlot(moving.slot, moving.name, moving.port, EMPTY, ALL);
        const reader = await openIoredis();
        const onEmpty = `127.0.0.1:${EMPTY}`;
        let cursor: string | null = null;
        try {
          const paging = inspectable(createRedisStore(reader.client, { prefix }));
          for (let page = 0; page < made.length; page++) {
            const result: Awaited<ReturnType<typeof paging.list>> = await paging.list({
              limit: 1,
              nowMs: NOW_MS,
              ...(cursor === null ? {} : { cursor }),
            });
            cursor = result.cursor;
            if (cursor === null || cursorParts(cursor)[3] === onEmpty) break;
          }
        } finally {
          await reader.close();
        }
        expect(cursor === null ? null : cursorParts(cursor)[3]).toBe(onEmpty);
        // Its slot goes back, and the node is removed from the Cluster (redis-cli shuts it down). It is told
        // first: a master that loses its last slot turns replica of the node that took it, and refuses SETSLOT.
        await moveSlot(moving.slot, moving.name, EMPTY, moving.port, [EMPTY, ...PORTS]);
        const id = String(await ask(EMPTY, (c) => c.cluster('MYID')));
        await run('redis-cli', ['--cluster', 'del-node', `127.0.0.1:${PORTS[0]}`, id]);
        await until('the cluster to know three masters again', async () =>
          /cluster_known_nodes:3/.test(String(await ask(PORTS[0] as number, (c) => c.cluster('INFO')))),
        );
        const fresh = await openIoredis();
        try {
          const again = inspectable(createRedisStore(fresh.client, { prefix }));
          await expect(again.list({ limit: 1, nowMs: NOW_MS, cursor: cursor as string })).rejects.toThrow(
            /127\.0\.0\.1:7404, which this listing was scanning, is no longer a master .* without a cursor/,
          );
          // A cursor that names no master at all says the same.
          const parts = cursorParts(cursor as string);
          const nowhere = cursorOf(parts.map((part, i) => (i === 3 ? '10.0.0.1:1' : part)));
          await expect(again.list({ limit: 1, nowMs: NOW_MS, cursor: nowhere })).rejects.toThrow(
            /no longer a master/,
          );
          expectExactlyOnce((await listAll(again, { limit: 4 })).records, made);
        } finally {
          await fresh.close();
        }
      } finally {
        await opened.close();
      }
    });
  },
);
