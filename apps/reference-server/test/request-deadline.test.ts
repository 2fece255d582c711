import { connect, createServer, Socket } from 'node:net';
import { sql } from 'drizzle-orm';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { DatabaseTimeout } from '../src/database/deadline.js';
import { openDatabase } from '../src/database/open.js';
import { CLIENT_MARGIN_MS } from '../src/database/options.js';
import { sleep } from './support/cluster.js';
import { backends } from './support/databases.js';
import { call, type Node, newKey, schema, startNode } from './support/server.js';
import { startTcpProxy, type TcpProxy } from './support/tcp-proxy.js';

/**
 * One deadline per request, from its arrival: with the request, statement and acquire bounds all at 500 ms, a
 * stall anywhere on the database path (getting a connection, a statement, the COMMIT) is answered within that
 * one deadline, never after the sum of the waits; and a connection given up on is closed, never reused.
 */

const DEADLINE_MS = 500;
// What an answer may take past the deadline on 2 shared cores: the timer's own lateness, the error's way
// through Fastify, the HTTP round trip on loopback, and a garbage collection now and then.
const MARGIN_MS = 250;

const SETTINGS = {
  REQUEST_TIMEOUT_MS: String(DEADLINE_MS),
  DATABASE_STATEMENT_TIMEOUT_MS: String(DEADLINE_MS),
  DATABASE_ACQUIRE_TIMEOUT_MS: String(DEADLINE_MS),
  IDEMPOTENCY_MAX_WAIT_MS: String(DEADLINE_MS),
  DATABASE_IDLE_TRANSACTION_TIMEOUT_MS: '1000',
  DATABASE_POOL_SIZE: '1',
  IDEMPOTENCY_PURGE_ENABLED: 'false',
  METRICS_ENABLED: 'false',
  AUDIT_LOG: 'false',
};

/** A request, timed from the client: its answer and how long it took. */
async function timed(
  node: Node,
  method: string,
  path: string,
  options: { body?: unknown; key?: string } = {},
) {
  const startedMs = performance.now();
  const answer = await call(node.url, method, path, options);
  return { answer, ms: performance.now() - startedMs };
}

const escapeRegExp = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

function expectRetryableInTime(result: Awaited<ReturnType<typeof timed>>, what: string) {
  expect(result.answer.status, `${what}: ${result.answer.text}`).toBe(503);
  expect(result.answer.headers.get('retry-after'), what).not.toBeNull();
  expect(result.answer.json().error.type).toBe('ServiceUnavailableException');
  expect(result.ms, `${what} answered after ${Math.round(result.ms)} ms`).toBeLessThan(
    DEADLINE_MS + MARGIN_MS,
  );
}

for (const backend of backends) {
  describe.runIf(await backend.up())(`one deadline per request on ${backend.name}`, () => {
    let database: Awaited<ReturnType<typeof backend.fresh>>;
    let proxy: TcpProxy;
    let node: Node;
    let proxied: () => string;
    const slowest: Record<string, number> = {};

    beforeAll(async () => {
      database = await backend.fresh();
      const target = new URL(database.url);
      proxy = await startTcpProxy({ host: target.hostname, port: Number(target.port) });
      proxied = () => {
        const url = new URL(database.url);
        url.host = `127.0.0.1:${proxy.port}`;
        return url.href;
      };
      node = await startNode(proxied(), SETTINGS);
      expect(
        (await call(node.url, 'POST', '/v1/namespaces', { body: { namespace: ['present'] } })).status,
      ).toBe(200);
    }, 60_000);

    afterAll(async () => {
      console.log(`slowest answers on ${backend.name} (ms): ${JSON.stringify(slowest)}`);
      await node?.close();
      await proxy?.close();
      await database?.drop();
    }, 60_000);

    /** After a scenario: the path heals, and the node answers at once again. */
    async function healed() {
      proxy.heal();
      const until = Date.now() + 5_000;
      for (;;) {
        const answer = await call(node.url, 'GET', '/v1/namespaces/present');
        if (answer.status === 200) return;
        if (Date.now() > until) throw new Error(`not healed: ${answer.status} ${answer.text}`);
        await sleep(50);
      }
    }

    const note = (what: string, ms: number) => {
      slowest[what] = Math.max(slowest[what] ?? 0, Math.round(ms));
    };

    test('a read whose statement stalls: 503 + Retry-After within the deadline', async () => {
      proxy.stallOn(/catalog_namespaces/);
      const result = await timed(node, 'GET', '/v1/namespaces/present');
      note('read, statement stall', result.ms);
      expectRetryableInTime(result, 'the stalled read');
      await healed();
    });

    test('a create whose statement stalls inside its transaction: 503 + Retry-After within the deadline', async () => {
      proxy.stallOn(/catalog_namespaces/);
      const result = await timed(node, 'POST', '/v1/namespaces', {
        key: newKey(),
        body: { namespace: ['s1'] },
      });
      note('create, statement stall', result.ms);
      expectRetryableInTime(result, 'the stalled create');
      await healed();
    });

    test('a create whose idempotency finalize stalls: 503 + Retry-After within the deadline, then a retry applies it once', async () => {
      const key = newKey();
      // The finalize writes the answer into the record: the only statement that carries it (as bytes, or in hex
      // when the driver formats the statement itself).
      const answer = '{"namespace":["s2"]';
      proxy.stallOn(new RegExp(`${escapeRegExp(answer)}|${Buffer.from(answer).toString('hex')}`, 'i'));
      const result = await timed(node, 'POST', '/v1/namespaces', { key, body: { namespace: ['s2'] } });
      note('create, finalize stall', result.ms);
      expectRetryableInTime(result, 'the stalled finalize');
      await healed();
      const retried = await call(node.url, 'POST', '/v1/namespaces', { key, body: { namespace: ['s2'] } });
      expect(retried.status, retried.text).toBe(200);
    });

    test('a create whose COMMIT stalls (with a key): the retryable 503 within the deadline, and its retry answers what committed', async () => {
      const key = newKey();
      proxy.stallOn(/commit/i);
      const result = await timed(node, 'POST', '/v1/namespaces', { key, body: { namespace: ['c1'] } });
      note('create, COMMIT stall', result.ms);
      expectRetryableInTime(result, 'the stalled COMMIT');
      await healed();
      const retried = await call(node.url, 'POST', '/v1/namespaces', { key, body: { namespace: ['c1'] } });
      // The COMMIT never reached the database: the retry runs it, once.
      expect(retried.status, retried.text).toBe(200);
      const again = await call(node.url, 'POST', '/v1/namespaces', { key, body: { namespace: ['c1'] } });
      expect(again.headers.get('idempotent-replayed')).toBe('true');
    });

    test('a COMMIT that commits but whose answer is lost (with a key): the retryable 503 within the deadline, and its retry replays, never runs again', async () => {
      const key = newKey();
      const stall = proxy.stallOn(/commit/i, { deliver: true });
      const result = await timed(node, 'POST', '/v1/namespaces', { key, body: { namespace: ['c3'] } });
      note('create, COMMIT answer lost', result.ms);
      expect(stall.stalled).toBe(true);
      expectRetryableInTime(result, 'the COMMIT whose answer was lost');
      await healed();
      const retried = await call(node.url, 'POST', '/v1/namespaces', { key, body: { namespace: ['c3'] } });
      expect(retried.status, retried.text).toBe(200);
      expect(retried.headers.get('idempotent-replayed')).toBe('true');
      expect(retried.json()).toEqual({ namespace: ['c3'], properties: {} });
    });

    test('a create whose COMMIT stalls (without a key): CommitStateUnknownException within the deadline, never a 503', async () => {
      proxy.stallOn(/commit/i);
      const result = await timed(node, 'POST', '/v1/namespaces', { body: { namespace: ['c2'] } });
      note('create without a key, COMMIT stall', result.ms);
      expect(result.answer.status, result.answer.text).toBe(500);
      expect(result.answer.json().error.type).toBe('CommitStateUnknownException');
      expect(result.ms).toBeLessThan(DEADLINE_MS + MARGIN_MS);
      await healed();
    });

    test('a replay whose read of the table as it is now stalls: 503 + Retry-After within the deadline, then the replay', async () => {
      const key = newKey();
      const create = () =>
        call(node.url, 'POST', '/v1/namespaces/present/tables', { key, body: { name: 'replayed', schema } });
      const first = await create();
      expect(first.status, first.text).toBe(200);
      // A replayed load result shows the table as it is now, read by its UUID inside the retry's transaction.
      const stall = proxy.stallOn(/AND uuid = /);
      const startedMs = performance.now();
      const replay = await create();
      const result = { answer: replay, ms: performance.now() - startedMs };
      note('replay, read stall', result.ms);
      expect(stall.stalled).toBe(true);
      expectRetryableInTime(result, 'the stalled replay');
      await healed();
      const again = await create();
      expect(again.status, again.text).toBe(200);
      expect(again.headers.get('idempotent-replayed')).toBe('true');
      expect(again.json()['metadata-location']).toBe(first.json()['metadata-location']);
    });

    test('a duplicate that waits for the request holding its key answers within its own deadline, and the key is applied once', async () => {
      const other = await startNode(proxied(), {
        ...SETTINGS,
        DATABASE_POOL_SIZE: '2',
      });
      try {
        const key = newKey();
        const body = { namespace: ['held-key'] };
        // The first holds the key's row in its transaction, and stalls after reserving it.
        proxy.stallOn(/catalog_namespaces/);
        const first = timed(node, 'POST', '/v1/namespaces', { key, body });
        await sleep(200);
        const duplicate = await timed(other, 'POST', '/v1/namespaces', { key, body });
        note('duplicate waiting for the key', duplicate.ms);
        expect(duplicate.ms).toBeLessThan(DEADLINE_MS + MARGIN_MS);
        if (duplicate.answer.status !== 200) expectRetryableInTime(duplicate, 'the duplicate');
        expectRetryableInTime(await first, 'the stalled first');
        await healed();
        const retried = await call(node.url, 'POST', '/v1/namespaces', { key, body });
        expect(retried.status, retried.text).toBe(200);
        const listed = await call(node.url, 'GET', '/v1/namespaces');
        expect(listed.json().namespaces.filter((n: string[]) => n[0] === 'held-key')).toHaveLength(1);
      } finally {
        await other.close();
      }
    });

    test('no connection to be had (the database path partitioned): 503 + Retry-After within the deadline', async () => {
      // The pool's connection is cut, and every new one hangs: a request waits for a connection.
      proxy.cut();
      proxy.partition();
      await sleep(50);
      for (const path of ['/v1/namespaces/present', '/v1/namespaces']) {
        const result =
          path === '/v1/namespaces'
            ? await timed(node, 'POST', path, { key: newKey(), body: { namespace: ['a1'] } })
            : await timed(node, 'GET', path);
        note('acquire stall', result.ms);
        expectRetryableInTime(result, `waiting for a connection (${path})`);
      }
      await healed();
    });

    test('a slow connection, then a stalled statement: the waits share one deadline instead of adding up', async () => {
      // The only connection is held by a request whose statement stalls; the next one waits for it, gets it
      // once the first gives up, and stalls too.
      proxy.stallOn(/catalog_namespaces/);
      const first = timed(node, 'GET', '/v1/namespaces/present');
      await sleep(300);
      proxy.stallOn(/catalog_namespaces/);
      const second = await timed(node, 'POST', '/v1/namespaces', {
        key: newKey(),
        body: { namespace: ['w1'] },
      });
      note('acquire wait then statement stall', second.ms);
      expectRetryableInTime(await first, 'the first');
      expectRetryableInTime(second, 'the one that waited for a connection');
      await healed();
    });

    test('the database itself stops a statement once the request’s time left has passed, though its own bound is 10 s', async () => {
      const db = await openDatabase(database.url, { statementTimeoutMs: 10_000 });
      const postgres = backend.name === 'PostgreSQL';
      const sleeping = postgres
        ? sql`SELECT pg_sleep(3) AS deadline_probe`
        : sql`SELECT SLEEP(3) AS deadline_probe`;
      const startedMs = performance.now();
      const error = await db
        .transaction(async (tx) => tx.rows(sleeping), performance.now() + 400)
        .catch((thrown: unknown) => thrown);
      expect(error).toBeInstanceOf(Error);
      expect(performance.now() - startedMs).toBeLessThan(400 + MARGIN_MS);
      await sleep(300);
      // Still running on the server? (The client closed its connection, which a sleeping session does not see.)
      const probe = "'%deadline\\_probe%'";
      let running: number;
      if (postgres) {
        const admin = new pg.Client({ connectionString: database.url });
        await admin.connect();
        const { rows } = await admin.query(
          `SELECT count(*) AS n FROM pg_stat_activity WHERE query LIKE ${probe} AND pid <> pg_backend_pid()`,
        );
        running = Number(rows[0].n);
        await admin.end();
      } else {
        const admin = await mysql.createConnection({ uri: database.url });
        const [rows] = await admin.query(
          `SELECT count(*) AS n FROM information_schema.processlist WHERE info LIKE ${probe} AND id <> CONNECTION_ID()`,
        );
        running = Number((rows as { n: unknown }[])[0]?.n);
        await admin.end();
      }
      expect(running, 'statements still running on the server').toBe(0);
      await db.close();
    });

    test('a connection whose statement was given up on is closed, not reused: the next request on a pool of one succeeds at once', async () => {
      const stall = proxy.stallOn(/catalog_namespaces/);
      const acceptedBefore = proxy.accepted;
      const stalled = await timed(node, 'GET', '/v1/namespaces/present');
      expectRetryableInTime(stalled, 'the stalled read');
      expect(stall.stalled).toBe(true);
      // No heal: the stalled connection stays silent, so only the node closing it frees the pool's one slot.
      const next = await timed(node, 'GET', '/v1/namespaces/present');
      note('the request after a stall, pool of one', next.ms);
      expect(next.answer.status, next.answer.text).toBe(200);
      expect(next.ms).toBeLessThan(DEADLINE_MS);
      expect(stall.closedByNode, 'the node closed the connection it gave up on').toBe(true);
      expect(proxy.accepted, 'a new connection was opened for the next request').toBe(acceptedBefore + 1);
      await healed();
    });

    test('an open whose schema statement stalls fails within its bounds, never hangs, and the next attempt opens', async () => {
      // The stalled connection stays silent after the open gives up on it: closing the pool must not wait for
      // it, or a node started while its database path stalls would wait for ever without trying again.
      const bounds = { statementTimeoutMs: DEADLINE_MS, acquireTimeoutMs: DEADLINE_MS };
      const stall = proxy.stallOn(/idem_records/);
      const startedMs = performance.now();
      const failed = await openDatabase(proxied(), bounds).then(
        async (db) => {
          await db.close();
          return undefined;
        },
        (error: unknown) => error,
      );
      const ms = performance.now() - startedMs;
      note('an open whose schema statement stalls', ms);
      expect(stall.stalled).toBe(true);
      expect(failed).toBeInstanceOf(DatabaseTimeout);
      // Getting the connection, the schema's own bound (statement plus the client's margin), then at most the
      // acquire bound to close.
      expect(ms).toBeLessThan(DEADLINE_MS + DEADLINE_MS + CLIENT_MARGIN_MS + DEADLINE_MS + MARGIN_MS);
      proxy.heal();
      const db = await openDatabase(proxied(), bounds);
      await db.ping();
      await db.close();
    });

    test('a connection given up on is destroyed, never left half-closed behind a path that stopped answering', async () => {
      // A path that goes silent once the schema's statement goes by and, from then on, never answers a FIN
      // either (a partition): a connection only half-closed (FIN sent, socket kept) would stay this process's.
      const target = new URL(database.url);
      const sockets = new Set<Socket>();
      let silenced: Socket | undefined;
      const blackhole = createServer({ allowHalfOpen: true }, (client) => {
        const upstream = connect({ host: target.hostname, port: Number(target.port) });
        let silent = false;
        for (const socket of [client, upstream]) {
          sockets.add(socket);
          socket.on('error', () => {});
        }
        client.on('data', (chunk: Buffer) => {
          if (!silent && chunk.toString('latin1').includes('idem_records')) {
            silent = true;
            silenced = client;
          }
          if (!silent) upstream.write(chunk);
        });
        upstream.on('data', (chunk: Buffer) => {
          if (!silent) client.write(chunk);
        });
        client.on('end', () => {
          if (!silent) upstream.end(() => client.end());
        });
      });
      await new Promise<void>((resolve) => blackhole.listen(0, '127.0.0.1', resolve));
      try {
        const url = new URL(database.url);
        url.host = `127.0.0.1:${(blackhole.address() as { port: number }).port}`;
        const bounds = { statementTimeoutMs: DEADLINE_MS, acquireTimeoutMs: DEADLINE_MS };
        const failed = await openDatabase(url.href, bounds).then(
          async (db) => {
            await db.close();
            return undefined;
          },
          (error: unknown) => error,
        );
        expect(failed).toBeInstanceOf(DatabaseTimeout);
        const stalled = silenced as Socket;
        expect(stalled).toBeDefined();
        // The node's end of that connection (it runs in this process): gone from the process's handles once
        // destroyed; a half-closed socket stays one, waiting for a FIN that will never come.
        const port = stalled.remotePort;
        const held = () =>
          (process as unknown as { _getActiveHandles(): unknown[] })
            ._getActiveHandles()
            .some((handle) => handle instanceof Socket && handle !== stalled && handle.localPort === port);
        for (let waited = 0; held() && waited < 1_000; waited += 50) await sleep(50);
        expect(held(), 'the node destroyed its end of the connection it gave up on').toBe(false);
      } finally {
        for (const socket of sockets) socket.destroy();
        await new Promise<void>((resolve) => blackhole.close(() => resolve()));
      }
    });
  });
}

describe('one deadline per request on SQLite (embedded: statements are synchronous)', () => {
  const insert = (name: string) =>
    sql`INSERT INTO catalog_namespaces (prefix, namespace, properties) VALUES ('', ${name}, '{}')`;
  const count = async (db: Awaited<ReturnType<typeof openDatabase>>, name: string) =>
    (await db.rows(sql`SELECT namespace FROM catalog_namespaces WHERE namespace = ${name}`)).length;

  test('a request that waits for the connection’s turn past its deadline is a 503 at once, and never runs later', async () => {
    const db = await openDatabase('sqlite::memory:');
    const holding = db.transaction(async (tx) => {
      await tx.run(insert('held'));
      await sleep(300); // a transaction that awaits (a metadata file written) keeps the connection's turn
    });
    const startedMs = performance.now();
    const error = await db
      .until(performance.now() + 100)
      .run(insert('late'))
      .catch((thrown: unknown) => thrown);
    expect(error).toBeInstanceOf(DatabaseTimeout);
    expect(performance.now() - startedMs).toBeLessThan(100 + MARGIN_MS);
    await holding;
    await sleep(20);
    expect(await count(db, 'held')).toBe(1);
    expect(await count(db, 'late')).toBe(0);
    await db.close();
  });

  test('a transaction whose deadline passes during its work rolls back: nothing committed, a 503', async () => {
    const db = await openDatabase('sqlite::memory:');
    const wrote = await db
      .transaction(async (tx) => {
        await tx.run(insert('wrote-then-slow'));
        await sleep(150);
      }, performance.now() + 100)
      .catch((thrown: unknown) => thrown);
    expect(wrote).toBeInstanceOf(DatabaseTimeout);
    const slow = await db
      .transaction(async (tx) => {
        await sleep(150);
        await tx.run(insert('slow-then-wrote'));
      }, performance.now() + 100)
      .catch((thrown: unknown) => thrown);
    expect(slow).toBeInstanceOf(DatabaseTimeout);
    expect(await count(db, 'wrote-then-slow')).toBe(0);
    expect(await count(db, 'slow-then-wrote')).toBe(0);
    await db.transaction(async (tx) => void (await tx.run(insert('in-time'))), performance.now() + 1_000);
    expect(await count(db, 'in-time')).toBe(1);
    await db.close();
  });
});
