import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { IdempotencyRecord } from '@idem/core';
import { createRedisStore } from '@idem/store-redis';
import { afterEach, describe, expect, test } from 'vitest';
import { CommitOutcomeUnknown } from '../src/database/deadline.js';
import { backends, type FreshDatabase } from './support/databases.js';
import { gate } from './support/gate.js';
import {
  type PrivateRedis,
  REDIS_URL,
  redisClient,
  redisUp,
  startPrivateRedis,
  sweep,
  uniquePrefix,
} from './support/redis.js';
import { call, type Node, type NodeOptions, newKey, schema as SCHEMA, startNode } from './support/server.js';
import { startTcpProxy, type TcpProxy } from './support/tcp-proxy.js';

// A store of its own (Redis, a database) fails on its own: keyed mutations answer a retryable 503 and nothing
// runs twice that the README does not say may; requests without a key go on. And the edges of the lease
// lifecycle: a record lost between reserve and commit, a store that stops answering at the fence or at the
// finalize, an ambiguous commit, a client that leaves, a shutdown with a mutation in flight.

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
/** The anonymous principal's scope with no catalog prefix (idempotency/scope.ts). */
const SCOPE = '\u001fanonymous';
/** Short leases, so that what waits for one to lapse waits a second or two. */
const SHORT = { IDEMPOTENCY_LEASE_MS: '1500', IDEMPOTENCY_MAX_WAIT_MS: '300' };

const exists = async (node: Node, namespace: string) =>
  (await call(node.url, 'HEAD', `/v1/namespaces/${namespace}`)).status === 204;

/** `send` again every 100 ms while it answers 503 (a key in flight), up to `forMs`; its first other answer. */
async function until503Ends(send: () => ReturnType<typeof call>, forMs: number) {
  const untilMs = performance.now() + forMs;
  for (;;) {
    const answer = await send();
    if (answer.status !== 503 || performance.now() > untilMs) return answer;
    await sleep(100);
  }
}

describe.runIf(await redisUp())('Redis as the store, reached through a proxy that can cut it off', () => {
  let node: Node | undefined;
  let proxy: TcpProxy | undefined;
  let prefix = uniquePrefix();
  afterEach(async () => {
    await node?.close();
    await proxy?.close();
    await sweep(false, prefix);
    node = undefined;
    proxy = undefined;
  });

  async function start(env: Record<string, string> = {}, options: NodeOptions = {}) {
    proxy = await startTcpProxy({ host: '127.0.0.1', port: Number(new URL(REDIS_URL).port || 6379) });
    prefix = uniquePrefix();
    node = await startNode(
      'sqlite::memory:',
      {
        IDEMPOTENCY_STORE: 'redis',
        IDEMPOTENCY_STORE_URL: `redis://127.0.0.1:${proxy.port}`,
        IDEMPOTENCY_STORE_PREFIX: prefix,
        ...env,
      },
      options,
    );
    return { node, proxy };
  }

  /** The record of `key` as Redis holds it now (read past the proxy). */
  async function recordOf(key: string): Promise<IdempotencyRecord | undefined> {
    const client = redisClient(false);
    try {
      return await createRedisStore(client, { prefix }).load({ scope: SCOPE, key });
    } finally {
      client.disconnect();
    }
  }

  test('Redis not reachable from the start: keyed mutations 503 with Retry-After in the store timeout, the rest served; /health says so', async () => {
    node = await startNode(
      'sqlite::memory:',
      {
        IDEMPOTENCY_STORE: 'redis',
        IDEMPOTENCY_STORE_URL: 'redis://127.0.0.1:1',
        IDEMPOTENCY_STORE_PREFIX: prefix,
      },
      { waitForStore: false },
    );
    const startedMs = performance.now();
    const keyed = await call(node.url, 'POST', '/v1/namespaces', {
      key: newKey(),
      body: { namespace: ['k'] },
    });
    expect(keyed.status, keyed.text).toBe(503);
    expect(keyed.headers.get('retry-after')).toBeTruthy();
    expect(keyed.json().error.type).toBe('ServiceUnavailableException');
    expect(performance.now() - startedMs).toBeLessThan(3_000); // the store timeout (2 s), not a hang
    expect(await exists(node, 'k')).toBe(false);
    expect((await call(node.url, 'POST', '/v1/namespaces', { body: { namespace: ['plain'] } })).status).toBe(
      200,
    );
    expect((await call(node.url, 'DELETE', '/v1/namespaces/plain')).status).toBe(204);
    const health = await fetch(`${node.url}/health`);
    const body = (await health.json()) as { components: unknown; idempotency: unknown };
    expect(health.status).toBe(503);
    expect(body.components).toEqual({ database: 'healthy', idempotency_service: 'unhealthy' });
    expect(body.idempotency).toEqual({ store: 'redis', topology: 'standalone', fence: 'lease' });
    // Reads and unkeyed writes still work: the node stays ready.
    expect((await fetch(`${node.url}/ready`)).status).toBe(200);
  });

  test('Redis partitioned, then back: keyed mutations 503 meanwhile and run once after; unkeyed ones never stop', async () => {
    const { node, proxy } = await start();
    const key = newKey();
    const body = { namespace: ['through'] };
    expect((await call(node.url, 'POST', '/v1/namespaces', { key, body })).status).toBe(200);
    proxy.partition();
    const during = await call(node.url, 'POST', '/v1/namespaces', {
      key: newKey(),
      body: { namespace: ['p'] },
    });
    expect(during.status).toBe(503);
    expect(during.headers.get('retry-after')).toBeTruthy();
    expect(await exists(node, 'p')).toBe(false);
    const unkeyed = await call(node.url, 'POST', '/v1/namespaces', { body: { namespace: ['unkeyed'] } });
    expect(unkeyed.status).toBe(200);
    proxy.heal();
    // The client reconnects by itself; a replay is answered once it has.
    const replay = await until503Ends(() => call(node.url, 'POST', '/v1/namespaces', { key, body }), 5_000);
    expect(replay.status).toBe(200);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
  });

  test('Redis partitioned with a request deadline under the store timeout: the keyed 503 comes by the deadline', async () => {
    const { node, proxy } = await start({ REQUEST_TIMEOUT_MS: '500' });
    expect(
      (await call(node.url, 'POST', '/v1/namespaces', { key: newKey(), body: { namespace: ['a'] } })).status,
    ).toBe(200);
    proxy.partition();
    const startedMs = performance.now();
    const key = newKey();
    const during = await call(node.url, 'POST', '/v1/namespaces', { key, body: { namespace: ['late'] } });
    const ms = performance.now() - startedMs;
    expect(during.status, during.text).toBe(503);
    expect(during.headers.get('retry-after')).toBeTruthy();
    expect(ms, `answered after ${Math.round(ms)} ms`).toBeLessThan(500 + 250); // not the store's 2 s
    proxy.heal();
    expect(await exists(node, 'late')).toBe(false);
    const retried = await until503Ends(
      () => call(node.url, 'POST', '/v1/namespaces', { key, body: { namespace: ['late'] } }),
      5_000,
    );
    expect(retried.status, retried.text).toBe(200);
  });

  test('the record lost between reserve and commit (as a Redis restart without persistence loses it): the fence finds no lease, nothing commits, 503; the retry runs once', async () => {
    let forget = false;
    const { node } = await start(
      {},
      {
        atBegin: async () => {
          if (forget) await sweep(false, prefix);
        },
      },
    );
    forget = true;
    const key = newKey();
    const body = { namespace: ['forgotten'] };
    const answer = await call(node.url, 'POST', '/v1/namespaces', { key, body });
    forget = false;
    expect(answer.status, answer.text).toBe(503);
    expect(answer.headers.get('retry-after')).toBeTruthy();
    expect(answer.json().error.message).toMatch(/reservation was lost before commit/);
    expect(await exists(node, 'forgotten')).toBe(false);
    const retry = await call(node.url, 'POST', '/v1/namespaces', { key, body });
    expect(retry.status).toBe(200);
    expect(retry.headers.get('idempotent-replayed')).toBeNull();
    expect(
      (await call(node.url, 'POST', '/v1/namespaces', { key, body })).headers.get('idempotent-replayed'),
    ).toBe('true');
  });

  test('Redis stops answering before the commit: the fence times out, nothing commits, 503; after it is back and the lease lapsed, the retry runs once', async () => {
    let cut = false;
    const { node, proxy } = await start(SHORT, {
      atBegin: async () => {
        if (cut) proxy?.partition();
      },
    });
    cut = true;
    const key = newKey();
    const body = { namespace: ['fenced'] };
    const startedMs = performance.now();
    const answer = await call(node.url, 'POST', '/v1/namespaces', { key, body });
    cut = false;
    expect(answer.status, answer.text).toBe(503);
    expect(answer.headers.get('retry-after')).toBeTruthy();
    expect(answer.json().error.message).toMatch(/did not confirm that this request still holds its key/);
    expect(performance.now() - startedMs).toBeLessThan(3_000);
    expect(await exists(node, 'fenced')).toBe(false);
    proxy.heal();
    // Its release could not reach Redis either: the key frees when its lease lapses.
    const retry = await until503Ends(() => call(node.url, 'POST', '/v1/namespaces', { key, body }), 6_000);
    expect(retry.status, retry.text).toBe(200);
    expect(retry.headers.get('idempotent-replayed')).toBeNull();
    expect(await exists(node, 'fenced')).toBe(true);
  });

  test('a node that loses Redis after its commit, before its finalize, and stops: the answer went out, the key stays in flight, and the retry after the lease runs again (the README’s weaker guarantee: 409 here)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'idem-store-faults-'));
    try {
      let cut = false;
      proxy = await startTcpProxy({ host: '127.0.0.1', port: Number(new URL(REDIS_URL).port || 6379) });
      const env = {
        ...SHORT,
        IDEMPOTENCY_STORE: 'redis',
        IDEMPOTENCY_STORE_URL: `redis://127.0.0.1:${proxy.port}`,
        IDEMPOTENCY_STORE_PREFIX: prefix,
      };
      const catalog = `sqlite:${join(dir, 'catalog.db')}`;
      const dying = await startNode(catalog, env, {
        beforeCommit: async () => {
          if (cut) proxy?.partition();
        },
      });
      cut = true;
      const key = newKey();
      const body = { namespace: ['unfinished'] };
      const answer = await call(dying.url, 'POST', '/v1/namespaces', { key, body });
      expect(answer.status).toBe(200); // the work committed: its answer is the truth, finalized or not
      // The node stops before Redis answers again: its finalize, still in its client's hands, is never sent.
      await dying.close();
      proxy.heal();
      expect((await recordOf(key))?.response).toBeNull(); // in flight, and nobody renews its lease
      node = await startNode(catalog, env);
      const again = await until503Ends(
        () => call(node?.url ?? '', 'POST', '/v1/namespaces', { key, body }),
        6_000,
      );
      expect(again.status, again.text).toBe(409); // ran a second time: the namespace was there
      expect(again.json().error.type).toBe('AlreadyExistsException');
      expect(again.headers.get('idempotent-replayed')).toBeNull();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('a commit whose outcome is unknown (it did commit): 500 CommitStateUnknownException, the key kept in flight until its lease lapses, never released at once', async () => {
    let lose = false;
    const { node } = await start(SHORT, {
      afterCommit: async () => {
        if (!lose) return;
        lose = false;
        throw new CommitOutcomeUnknown(100);
      },
    });
    lose = true;
    const key = newKey();
    const body = { namespace: ['unknown'] };
    const answer = await call(node.url, 'POST', '/v1/namespaces', { key, body });
    expect(answer.status, answer.text).toBe(500);
    expect(answer.json().error.type).toBe('CommitStateUnknownException');
    expect(answer.headers.get('retry-after')).toBeNull(); // not an invitation to retry at once
    expect(await exists(node, 'unknown')).toBe(true);
    expect((await recordOf(key))?.response).toBeNull(); // in flight: not released, not finalized
    const early = await call(node.url, 'POST', '/v1/namespaces', { key, body });
    expect(early.status).toBe(503);
    const later = await until503Ends(() => call(node.url, 'POST', '/v1/namespaces', { key, body }), 6_000);
    expect(later.status).toBe(409);
  });

  test('a client that gives up mid-mutation: the work commits, its answer is finalized, and the retry replays it', async () => {
    const held = gate();
    const { node } = await start({}, { beforeCommit: held.pass });
    const key = newKey();
    const body = { namespace: ['abandoned'] };
    held.close();
    const client = new AbortController();
    const gone = fetch(`${node.url}/v1/namespaces`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': key },
      body: JSON.stringify(body),
      signal: client.signal,
    }).catch((error: unknown) => error);
    await held.entered;
    client.abort();
    expect(await gone).toBeInstanceOf(Error);
    await sleep(50);
    held.open();
    let record = await recordOf(key);
    for (let i = 0; i < 50 && record?.response === null; i++) {
      await sleep(20);
      record = await recordOf(key);
    }
    expect(record?.response?.status).toBe(200);
    const retry = await call(node.url, 'POST', '/v1/namespaces', { key, body });
    expect(retry.status).toBe(200);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
  });

  test('shutdown with a keyed mutation in flight: the drain waits for it, its answer is finalized, then the Redis client is closed', async () => {
    const held = gate();
    const { node: running, proxy } = await start({}, { beforeCommit: held.pass });
    const key = newKey();
    const body = { namespace: ['draining'] };
    held.close();
    const answer = call(running.url, 'POST', '/v1/namespaces', { key, body });
    await held.entered;
    expect(proxy.open).toBeGreaterThan(0);
    const drained = running.app.drain(5_000);
    await sleep(100);
    held.open();
    expect((await answer).status).toBe(200);
    expect(await drained).toBe(true);
    expect((await recordOf(key))?.response?.status).toBe(200);
    for (let i = 0; i < 50 && proxy.open > 0; i++) await sleep(20);
    expect(proxy.open).toBe(0); // what the server opened is closed
  });
});

const [postgres] = backends as [(typeof backends)[number]];

describe.runIf((await redisUp()) && (await postgres.up()))(
  'two nodes on one catalog, one of them cut off from Redis while it holds a key',
  () => {
    const prefix = uniquePrefix();
    let database: FreshDatabase | undefined;
    let proxy: TcpProxy | undefined;
    let warehouse: string | undefined;
    const nodes: Node[] = [];
    afterEach(async () => {
      for (const node of nodes.splice(0)) await node.close();
      await proxy?.close();
      await database?.drop();
      await sweep(false, prefix);
      if (warehouse !== undefined) rmSync(warehouse, { recursive: true, force: true });
    });

    /** Node A reaches Redis through the proxy and pauses each transaction at its start while `paused`; B directly. */
    async function twoNodes() {
      database = await postgres.fresh();
      proxy = await startTcpProxy({ host: '127.0.0.1', port: Number(new URL(REDIS_URL).port || 6379) });
      // One warehouse for both, as nodes of one catalog share it: each may write the other's tables.
      warehouse = mkdtempSync(join(tmpdir(), 'idem-shared-warehouse-'));
      const env = {
        ...SHORT,
        IDEMPOTENCY_STORE: 'redis',
        IDEMPOTENCY_STORE_PREFIX: prefix,
        WAREHOUSE: warehouse,
      };
      const paused = gate();
      let pausing = false;
      const a = await startNode(
        database.url,
        { ...env, IDEMPOTENCY_STORE_URL: `redis://127.0.0.1:${proxy.port}` },
        {
          atBegin: async () => {
            if (pausing) await paused.pass();
          },
        },
      );
      const b = await startNode(database.url, { ...env, IDEMPOTENCY_STORE_URL: REDIS_URL });
      nodes.push(a, b);
      return {
        a,
        b,
        proxy,
        /** Pause A's next transaction (its key reserved, its work not begun) until `resume`. */
        pause() {
          pausing = true;
          paused.close();
          return paused.entered;
        },
        resume() {
          pausing = false;
          paused.open();
        },
      };
    }

    test('its lease lapses and the other node takes the key over and commits: the first one’s fence refuses its commit (503), the change is made once, the retry replays', async () => {
      const { a, b, proxy, pause, resume } = await twoNodes();
      await call(b.url, 'POST', '/v1/namespaces', { body: { namespace: ['n'] } });
      await call(b.url, 'POST', '/v1/namespaces/n/tables', { body: { name: 't', schema: SCHEMA } });
      const key = newKey();
      const commit = { requirements: [], updates: [{ action: 'set-properties', updates: { by: 'once' } }] };
      const paused = pause();
      const first = call(a.url, 'POST', '/v1/namespaces/n/tables/t', { key, body: commit });
      await paused;
      proxy.partition(); // A can no longer renew its lease
      await sleep(2_000); // past IDEMPOTENCY_LEASE_MS
      const taken = await call(b.url, 'POST', '/v1/namespaces/n/tables/t', { key, body: commit });
      expect(taken.status, taken.text).toBe(200);
      expect(taken.headers.get('idempotent-replayed')).toBeNull(); // B took the lapsed key over and ran it
      proxy.heal();
      resume();
      const refused = await first;
      expect(refused.status, refused.text).toBe(503);
      expect(refused.headers.get('retry-after')).toBeTruthy();
      const table = (await call(b.url, 'GET', '/v1/namespaces/n/tables/t')).json();
      expect(table.metadata['metadata-log']).toHaveLength(1); // one commit, not two
      const retry = await call(a.url, 'POST', '/v1/namespaces/n/tables/t', { key, body: commit });
      expect(retry.status).toBe(200);
      expect(retry.headers.get('idempotent-replayed')).toBe('true');
      expect(retry.text).toBe(taken.text);
    });

    test('a refusal found after the key was taken over is not sent (503): the retry replays the answer of the node that holds the key', async () => {
      const { a, b, proxy, pause, resume } = await twoNodes();
      const key = newKey();
      const body = { namespace: ['taken'] };
      const paused = pause();
      const first = call(a.url, 'POST', '/v1/namespaces', { key, body });
      await paused;
      proxy.partition();
      await sleep(2_000);
      const taken = await call(b.url, 'POST', '/v1/namespaces', { key, body });
      expect(taken.status).toBe(200);
      proxy.heal();
      resume();
      // A's create now finds the namespace B made: a 409 that is not A's to store, so not A's to send either.
      const refused = await first;
      expect(refused.status, refused.text).toBe(503);
      const retry = await call(a.url, 'POST', '/v1/namespaces', { key, body });
      expect(retry.status).toBe(200);
      expect(retry.headers.get('idempotent-replayed')).toBe('true');
    });
  },
);

describe.runIf(await redisUp())(
  'a Redis server of the test’s own, restarted empty (no persistence) mid-mutation',
  () => {
    let redis: PrivateRedis | undefined;
    let node: Node | undefined;
    afterEach(async () => {
      await node?.close();
      await redis?.stop();
      node = undefined;
      redis = undefined;
    });

    test('restarted before the commit: the fence finds the key gone, nothing commits (503), the retry runs once; restarted after it: the finalize finds nothing, the answer goes out, and the retry runs again (409)', async () => {
      redis = await startPrivateRedis();
      let restart: 'at-begin' | 'before-commit' | undefined;
      node = await startNode(
        'sqlite::memory:',
        { IDEMPOTENCY_STORE: 'redis', IDEMPOTENCY_STORE_URL: redis.url },
        {
          atBegin: async () => {
            if (restart === 'at-begin') await redis?.restart();
          },
          beforeCommit: async () => {
            if (restart === 'before-commit') await redis?.restart();
          },
        },
      );
      const running = node;
      const create = (key: string, namespace: string) =>
        call(running.url, 'POST', '/v1/namespaces', { key, body: { namespace: [namespace] } });

      restart = 'at-begin';
      const key = newKey();
      const lost = await create(key, 'before');
      restart = undefined;
      expect(lost.status, lost.text).toBe(503);
      expect(await exists(running, 'before')).toBe(false);
      const retry = await until503Ends(() => create(key, 'before'), 5_000);
      expect(retry.status, retry.text).toBe(200);
      expect(retry.headers.get('idempotent-replayed')).toBeNull();

      restart = 'before-commit';
      const other = newKey();
      const done = await until503Ends(() => create(other, 'after'), 5_000);
      restart = undefined;
      expect(done.status, done.text).toBe(200); // committed: answered, though Redis forgot the key meanwhile
      const again = await until503Ends(() => create(other, 'after'), 5_000);
      expect(again.status).toBe(409); // forgotten by Redis: run again, and the catalog refuses it
    });
  },
);

describe.runIf(await postgres.up())(
  'a PostgreSQL database of its own as the store, reached through a proxy',
  () => {
    let node: Node | undefined;
    let proxy: TcpProxy | undefined;
    let records: FreshDatabase | undefined;
    afterEach(async () => {
      await node?.close();
      await proxy?.close();
      await records?.drop();
      node = undefined;
      proxy = undefined;
      records = undefined;
    });

    test('the store’s database cut off: keyed mutations 503, the rest served, /health says so; its pool closes with the server', async () => {
      records = await postgres.fresh();
      const target = new URL(records.url);
      proxy = await startTcpProxy({ host: target.hostname, port: Number(target.port || 5432) });
      const proxied = new URL(records.url);
      proxied.port = String(proxy.port);
      node = await startNode('sqlite::memory:', {
        IDEMPOTENCY_STORE_URL: proxied.href,
        IDEMPOTENCY_POOL_SIZE: '2',
      });
      const key = newKey();
      const body = { namespace: ['before'] };
      expect((await call(node.url, 'POST', '/v1/namespaces', { key, body })).status).toBe(200);
      proxy.partition();
      const keyed = await call(node.url, 'POST', '/v1/namespaces', {
        key: newKey(),
        body: { namespace: ['cut'] },
      });
      expect(keyed.status).toBe(503);
      expect(keyed.headers.get('retry-after')).toBeTruthy();
      expect(await exists(node, 'cut')).toBe(false);
      expect(
        (await call(node.url, 'POST', '/v1/namespaces', { body: { namespace: ['unkeyed'] } })).status,
      ).toBe(200);
      const health = await fetch(`${node.url}/health`);
      expect(health.status).toBe(503);
      expect(((await health.json()) as { idempotency: unknown }).idempotency).toEqual({
        store: 'sql',
        database: 'separate',
        fence: 'lease',
      });
      proxy.heal();
      const replay = await until503Ends(
        () => call(node?.url ?? '', 'POST', '/v1/namespaces', { key, body }),
        8_000,
      );
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
      await node.close();
      node = undefined;
      for (let i = 0; i < 50 && proxy.open > 0; i++) await sleep(20);
      expect(proxy.open).toBe(0);
    });
  },
);
