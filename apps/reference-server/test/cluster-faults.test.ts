import { existsSync } from 'node:fs';
import { connect } from 'node:net';
import { fileURLToPath } from 'node:url';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { v7 } from 'uuid';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  attempt,
  CLUSTER_SETTINGS,
  type Cluster,
  type ClusterNode,
  count,
  isFinal,
  logical,
  newTally,
  pool,
  sleep,
  startCluster,
  type Tally,
} from './support/cluster.js';
import { backends } from './support/databases.js';
import { schema } from './support/server.js';

/**
 * Faults under load, as an operator meets them: three catalog processes on one database, every request sent
 * as three copies at once with one key (one per node) and retried with that key, while nodes are killed,
 * stopped and stalled, and their database paths are cut and partitioned (a loopback proxy per node).
 */

const TABLES = 4;

/**
 * Every answer a node gives comes within one request deadline (REQUEST_TIMEOUT_MS, from the request's arrival
 * on the node) plus this margin, counted by the client from sending to the last byte of the answer: the trip
 * over loopback, and the node's event loop behind the storm's other requests, on 2 cores shared by three nodes,
 * the database and the client. Measured: the slowest answer of a whole run 2.04 s (PostgreSQL) and 2.01 s
 * (MariaDB) for a 2 s deadline; the margin leaves room for a slower machine and stays below the 1 s a second
 * wait would add (before one deadline per request, the single-connection stalls were answered after 3.1-4.0 s).
 */
const REQUEST_DEADLINE_MS = Number(CLUSTER_SETTINGS.REQUEST_TIMEOUT_MS);
const ANSWER_MARGIN_MS = 1_000;
const STORM = 120; // logical requests per storm: 3 copies each, plus retries

/** What a scenario counted, summed over the suite and printed at its end. */
const totals = {
  logical: 0,
  attempts: 0,
  kills: 0,
  cuts: 0,
  partitions: 0,
  stalls: 0,
  terms: 0,
  answered503: 0,
  without503RetryAfter: 0,
  connectionErrors: 0,
  wrongAnswers: 0,
  lost: 0,
  duplicates: 0,
  blockedAfterKillMs: [] as number[],
  blockedAfterStopMs: [] as number[],
  slowestAnswerMs: 0,
  connectionStalls: 0,
};

/** A direct connection to the database (not through any node's proxy), for what only it can tell. */
interface Direct {
  /** Records still in flight (no answer stored): none may be left once a scenario ends. */
  inFlight(): Promise<number>;
  records(): Promise<number>;
  clearRecords(): Promise<void>;
  /** Hold the row of table `name` locked (as a long commit would) until the returned function is called. */
  lockTable(namespace: string, name: string): Promise<() => Promise<void>>;
  close(): Promise<void>;
}

async function direct(url: string, dialect: 'postgres' | 'mysql'): Promise<Direct> {
  if (dialect === 'postgres') {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    const number = async (text: string) => Number((await client.query(text)).rows[0].n);
    return {
      inFlight: () => number('SELECT count(*) AS n FROM idem_records WHERE response_status IS NULL'),
      records: () => number('SELECT count(*) AS n FROM idem_records'),
      clearRecords: async () => void (await client.query('DELETE FROM idem_records')),
      async lockTable(namespace, name) {
        await client.query('BEGIN');
        await client.query('SELECT 1 FROM catalog_entities WHERE namespace = $1 AND name = $2 FOR UPDATE', [
          namespace,
          name,
        ]);
        return async () => void (await client.query('COMMIT'));
      },
      close: () => client.end(),
    };
  }
  const connection = await mysql.createConnection({ uri: url });
  const number = async (text: string) => {
    const [rows] = await connection.query(text);
    return Number((rows as { n: unknown }[])[0]?.n);
  };
  return {
    inFlight: () => number('SELECT count(*) AS n FROM idem_records WHERE response_status IS NULL'),
    records: () => number('SELECT count(*) AS n FROM idem_records'),
    clearRecords: async () => void (await connection.query('DELETE FROM idem_records')),
    async lockTable(namespace, name) {
      await connection.query('BEGIN');
      await connection.query('SELECT 1 FROM catalog_entities WHERE namespace = ? AND name = ? FOR UPDATE', [
        namespace,
        name,
      ]);
      return async () => void (await connection.query('COMMIT'));
    },
    close: () => connection.end(),
  };
}

/** A read's JSON, retried while the node answers 503 (its database path just healed, say). */
// biome-ignore lint/suspicious/noExplicitAny: tests read answers field by field.
async function getJson(url: string): Promise<any> {
  const until = Date.now() + 15_000;
  for (;;) {
    const response = await fetch(url).catch(() => undefined);
    if (response?.status === 200) return response.json();
    const text = await response?.text();
    if (Date.now() > until) throw new Error(`GET ${url}: ${response?.status} ${text}`);
    await sleep(200);
  }
}

const commitBody = (property: string) => ({
  requirements: [],
  updates: [{ action: 'set-properties', updates: { [property]: 'applied' } }],
});

/** A final answer every copy of a setup request must get. */
async function setUp(cluster: Cluster, path: string, body: unknown): Promise<void> {
  const tally = newTally();
  const answers = await logical(cluster, tally, { method: 'POST', path, key: v7(), body });
  expect(answers?.map((answer) => answer.status)).toEqual([200, 200, 200]);
}

/** A namespace `label` with TABLES tables, for a scenario's commits. */
async function prepare(cluster: Cluster, label: string): Promise<void> {
  await setUp(cluster, '/v1/namespaces', { namespace: [label] });
  for (let t = 0; t < TABLES; t++)
    await setUp(cluster, `/v1/namespaces/${label}/tables`, { name: `t${t}`, schema });
}

/** The operations of a storm: half namespace creates, half commits spread over the scenario's tables. */
function operations(label: string, size: number) {
  return Array.from({ length: size }, (_, i) =>
    i % 2 === 0
      ? {
          kind: 'namespace' as const,
          method: 'POST',
          path: '/v1/namespaces',
          body: { namespace: [`${label}_n${i}`] },
        }
      : {
          kind: 'commit' as const,
          table: `t${i % TABLES}`,
          property: `op${i}`,
          method: 'POST',
          path: `/v1/namespaces/${label}/tables/t${i % TABLES}`,
          body: commitBody(`op${i}`),
        },
  );
}

/** Run a storm of `size` logical requests, `width` at a time, while `faults` runs; returns its counts. */
async function storm(
  cluster: Cluster,
  label: string,
  size: number,
  faults: (done: () => boolean) => Promise<void> = async () => {},
): Promise<Tally> {
  const tally = newTally();
  const ops = operations(label, size);
  let finished = false;
  let failed: unknown;
  const faulting = faults(() => finished).catch((error: unknown) => {
    failed = error;
  });
  const answers = await pool(
    ops.map((op) => () => logical(cluster, tally, { ...op, key: v7() })),
    12,
  );
  finished = true;
  await faulting;
  if (failed !== undefined) throw failed;
  for (const [i, answer] of answers.entries()) {
    // Every logical request applied: its copies all got the same 200.
    if (answer !== undefined && answer[0]?.status !== 200) {
      tally.wrongAnswers++;
      console.warn(`${label} op ${i}: ${answer[0]?.status} ${answer[0]?.text}`);
    }
  }
  await appliedOnce(cluster, label, ops);
  return tally;
}

/**
 * Each operation applied exactly once, from the catalog and the warehouse: every namespace there, and each
 * table's metadata log holding exactly one entry per commit made to it, every file of it in the warehouse.
 */
async function appliedOnce(cluster: Cluster, label: string, ops: ReturnType<typeof operations>) {
  const node = cluster.nodes.find((n) => n.running) as ClusterNode;
  const listed = await getJson(`${node.url}/v1/namespaces`);
  const names = new Set((listed.namespaces as string[][]).map((namespace) => namespace.join('.')));
  for (const op of ops)
    if (op.kind === 'namespace') expect(names.has(op.body.namespace[0] as string)).toBe(true);
  for (let t = 0; t < TABLES; t++) {
    const commits = ops.filter((op) => op.kind === 'commit' && op.table === `t${t}`);
    const loaded = await getJson(`${node.url}/v1/namespaces/${label}/tables/t${t}`);
    const log = loaded.metadata['metadata-log'] as { 'metadata-file': string }[];
    const duplicates = log.length - commits.length;
    totals.duplicates += Math.max(0, duplicates);
    expect(log.length, `commits applied to ${label}.t${t}`).toBe(commits.length);
    for (const op of commits)
      if (op.kind === 'commit') expect(loaded.metadata.properties[op.property]).toBe('applied');
    for (const entry of [...log.map((e) => e['metadata-file']), loaded['metadata-location'] as string])
      expect(existsSync(entry.startsWith('file:') ? fileURLToPath(entry) : entry)).toBe(true);
  }
}

/** What every scenario asserts, after its own checks. */
async function healthy(cluster: Cluster, db: Direct, tally: Tally) {
  console.log(`scenario: ${expect.getState().currentTestName}: ${JSON.stringify(tally)}`);
  totals.logical += tally.logical;
  totals.attempts += tally.attempts;
  totals.answered503 += tally.answered503;
  totals.without503RetryAfter += tally.without503RetryAfter;
  totals.connectionErrors += tally.connectionErrors;
  totals.wrongAnswers += tally.wrongAnswers;
  totals.lost += tally.lost;
  totals.slowestAnswerMs = Math.max(totals.slowestAnswerMs, tally.slowestMs);
  expect(tally.slowestMs, 'the slowest answer, in ms (one request deadline + margin)').toBeLessThan(
    REQUEST_DEADLINE_MS + ANSWER_MARGIN_MS,
  );
  expect(tally.wrongAnswers, 'copies that got different answers').toBe(0);
  expect(tally.lost, 'logical requests without a final answer').toBe(0);
  expect(tally.other5xx, 'non-retryable 5xx').toBe(0);
  expect(tally.without503RetryAfter, '503 without Retry-After').toBe(0);
  expect(
    cluster.unexpectedExits(),
    cluster.nodes.map((n) => n.output.slice(-20).join('\n')).join('\n---\n'),
  ).toEqual([]);
  expect(await db.inFlight(), 'reservations left in flight').toBe(0);
}

/**
 * A connection to a node with a request on its way: `begin` sends its first bytes (the node sees a request
 * started on an open connection), `end` the rest, and reads the answer.
 */
async function rawRequest(port: number, request: string) {
  const socket = connect(port, '127.0.0.1');
  let received = '';
  socket.on('data', (chunk: Buffer) => {
    received += String(chunk);
  });
  socket.on('error', () => {});
  await new Promise((resolve) => socket.once('connect', resolve));
  const split = request.indexOf('\r\n') + 2;
  socket.write(request.slice(0, split));
  return {
    async end() {
      socket.write(request.slice(split));
      const until = Date.now() + 5_000;
      for (;;) {
        const head = received.indexOf('\r\n\r\n');
        const length = /content-length: (\d+)/i.exec(received);
        if (head !== -1 && length && received.length >= head + 4 + Number(length[1])) {
          socket.destroy();
          return {
            status: Number(received.slice(9, 12)),
            retryAfter: /retry-after: (\S+)/i.exec(received)?.[1],
            connection: /connection: (\S+)/i.exec(received)?.[1],
            body: received.slice(head + 4, head + 4 + Number(length[1])),
          };
        }
        if (Date.now() > until || socket.destroyed)
          throw new Error(`no answer; got ${JSON.stringify(received)}`);
        await sleep(20);
      }
    },
  };
}

const pick = (cluster: Cluster) =>
  cluster.nodes[Math.floor(Math.random() * cluster.nodes.length)] as ClusterNode;

/**
 * Hold table `t0` of `label` locked, send a commit with a fresh key to `node` (which reserves the key in its
 * transaction and waits on the table's row), and run `fault` on it then; then free the table and measure how
 * long the key stays blocked for the other nodes: until one of them answers the commit with a 200.
 */
async function blockedKey(
  cluster: Cluster,
  db: Direct,
  label: string,
  node: ClusterNode,
  fault: () => Promise<void>,
) {
  const unlock = await db.lockTable(label, 't0');
  const key = v7();
  const path = `/v1/namespaces/${label}/tables/t0`;
  const body = commitBody(`blocked-${key}`);
  const held = attempt(node, 'POST', path, key, body, 30_000);
  await sleep(400); // the node has reserved the key and waits on the table's row
  await fault();
  const faultedMs = Date.now();
  await unlock();
  const others = cluster.nodes.filter((n) => n !== node);
  const tally = newTally();
  let winner: Awaited<ReturnType<typeof attempt>> | undefined;
  for (let i = 0; Date.now() - faultedMs < 20_000; i++) {
    const answer = await attempt(others[i % others.length] as ClusterNode, 'POST', path, key, body);
    count(tally, answer);
    if (isFinal(answer)) {
      winner = answer;
      break;
    }
    await sleep(50);
  }
  return { key, path, body, held, winner, tally, blockedMs: Date.now() - faultedMs };
}

for (const backend of backends) {
  describe.runIf(await backend.up())(`a 3-node cluster on one ${backend.name} database under faults`, () => {
    let database: Awaited<ReturnType<typeof backend.fresh>>;
    let cluster: Cluster;
    let db: Direct;
    const dialect = backend.name === 'PostgreSQL' ? 'postgres' : 'mysql';

    beforeAll(async () => {
      database = await backend.fresh();
      cluster = await startCluster(database.url);
      db = await direct(database.url, dialect);
    }, 60_000);

    afterAll(async () => {
      await cluster?.close();
      await db?.close();
      await database?.drop();
      console.log(`cluster totals (${backend.name} and before): ${JSON.stringify(totals)}`);
    }, 60_000);

    test('a storm: every request applied once, every copy the same answer', async () => {
      await prepare(cluster, 'storm');
      const tally = await storm(cluster, 'storm', STORM);
      await healthy(cluster, db, tally);
    }, 120_000);

    test('kill -9 of a node every 0.7 s (one left up), restarted at once: nothing lost, nothing twice', async () => {
      await prepare(cluster, 'kills');
      const restarting = new Map<ClusterNode, Promise<void>>();
      const tally = await storm(cluster, 'kills', 2 * STORM, async (done) => {
        while (!done()) {
          await sleep(700);
          // One node at least stays up; a node is killed again only once it is ready after its restart.
          const candidates = cluster.nodes.filter((node) => !restarting.has(node));
          if (done() || candidates.length < 2) continue;
          const node = candidates[Math.floor(Math.random() * candidates.length)] as ClusterNode;
          await node.signal('SIGKILL');
          totals.kills++;
          // Restarted at once, as a supervisor does; the storm goes on meanwhile (the node's port refuses
          // connections until it listens, and its requests answer 503 until its database is open).
          restarting.set(
            node,
            node
              .start()
              .then(() => node.ready())
              .finally(() => restarting.delete(node)),
          );
        }
        await Promise.all(restarting.values());
      });
      // The key a killed node held: free as soon as its database session ends with its connection.
      const node = cluster.nodes[0] as ClusterNode;
      const probe = await blockedKey(cluster, db, 'kills', node, async () => {
        await node.signal('SIGKILL');
        totals.kills++;
      });
      expect(probe.winner?.status).toBe(200);
      expect((await probe.held).status).toBeUndefined(); // killed: no answer
      totals.blockedAfterKillMs.push(probe.blockedMs);
      expect(probe.blockedMs).toBeLessThan(5_000);
      await node.start();
      await node.ready();
      await healthy(cluster, db, tally);
    }, 180_000);

    test('cuts of a node’s database path every 0.3 s: no node exits, every 503 retryable', async () => {
      await prepare(cluster, 'cuts');
      const tally = await storm(cluster, 'cuts', STORM, async (done) => {
        while (!done()) {
          await sleep(300);
          pick(cluster).proxy.cut();
          totals.cuts++;
        }
      });
      await healthy(cluster, db, tally);
    }, 180_000);

    test('a node started while its database is cut off waits for it, /ready saying so', async () => {
      const node = cluster.nodes[2] as ClusterNode;
      await node.signal('SIGTERM');
      node.proxy.partition();
      totals.partitions++;
      await node.start();
      await sleep(2_000);
      const ready = await fetch(`${node.url}/ready`);
      expect(ready.status).toBe(503);
      expect(((await ready.json()) as { status: string }).status).toBe('not_ready');
      expect((await fetch(`${node.url}/live`)).status).toBe(200);
      const refused = await attempt(node, 'POST', '/v1/namespaces', v7(), { namespace: ['early'] });
      expect(refused.status).toBe(503);
      expect(refused.retryAfter).not.toBeNull();
      expect(JSON.parse(refused.text as string).error.type).toBe('ServiceUnavailableException');
      node.proxy.heal();
      await node.ready(15_000);
      expect(cluster.unexpectedExits()).toEqual([]);
    }, 60_000);

    test('a partition (silent database): answers and /readyz come within the bounds, then all heals', async () => {
      await prepare(cluster, 'partition');
      const node = cluster.nodes[1] as ClusterNode;
      const probes: { status: number | undefined; ms: number }[] = [];
      const tally = await storm(cluster, 'partition', STORM, async () => {
        await sleep(500);
        node.proxy.partition();
        totals.partitions++;
        const until = Date.now() + 4_000;
        while (Date.now() < until) {
          const startedMs = Date.now();
          const status = await fetch(`${node.url}/readyz`, { signal: AbortSignal.timeout(10_000) }).then(
            (response) => response.status,
            () => undefined,
          );
          probes.push({ status, ms: Date.now() - startedMs });
          await sleep(300);
        }
        node.proxy.heal();
      });
      // HEALTH_TIMEOUT_MS is 500: each probe answered well within a second, and 503 while partitioned.
      expect(probes.every((probe) => probe.ms < 1_500)).toBe(true);
      expect(probes.filter((probe) => probe.status === 503).length).toBeGreaterThan(probes.length / 2);
      // Statement 2 s (+1 s on the client), acquire 2 s, all within one 2 s request deadline: no attempt
      // waited past it (checked again by `healthy`, for every scenario).
      expect(tally.slowestMs).toBeLessThan(REQUEST_DEADLINE_MS + ANSWER_MARGIN_MS);
      await node.ready();
      await healthy(cluster, db, tally);
    }, 180_000);

    test('single connections stalled under load (a statement, the finalize, a COMMIT sent or not): every answer within one deadline, every request applied once', async () => {
      await prepare(cluster, 'stalls');
      // What a connection may stall on: the catalog's statements, the idempotency record's, and the COMMIT,
      // held back or delivered with its answer lost (the commit then happened: its retry must replay it).
      const patterns = [/catalog_entities/, /catalog_namespaces/, /idem_records/, /commit/i];
      const tally = await storm(cluster, 'stalls', STORM, async (done) => {
        while (!done()) {
          await sleep(150);
          const pattern = patterns[Math.floor(Math.random() * patterns.length)] as RegExp;
          pick(cluster).proxy.stallOn(pattern, { deliver: Math.random() < 0.5 });
          totals.connectionStalls++;
        }
      });
      // The last stalls armed may not have matched: they must not stall the scenarios after this one.
      for (const node of cluster.nodes) node.proxy.disarm();
      await healthy(cluster, db, tally);
    }, 180_000);

    test('a node stalled (SIGSTOP) holding a key: the key frees itself, the stale node never answers its own result', async () => {
      await prepare(cluster, 'stall');
      const node = cluster.nodes[0] as ClusterNode;
      const probe = await blockedKey(cluster, db, 'stall', node, async () => {
        node.pause();
        totals.stalls++;
      });
      // Another node got the key and applied the commit while the stalled one was stopped.
      expect(probe.winner?.status).toBe(200);
      totals.blockedAfterStopMs.push(probe.blockedMs);
      expect(probe.blockedMs).toBeLessThan(6_000);
      node.resume();
      const stale = await probe.held;
      // Its reservation was lost with its session: a retryable 503, never a result of its own.
      expect(stale.status === 503 || stale.text === probe.winner?.text, `${stale.status} ${stale.text}`).toBe(
        true,
      );
      if (stale.status === 503) expect(stale.retryAfter).not.toBeNull();
      // Its client retries with the same key (on the same node, which may answer 503 once more) and gets the
      // replay of the commit that won.
      let retried = await attempt(node, 'POST', probe.path, probe.key, probe.body);
      for (let i = 0; i < 20 && !isFinal(retried); i++) {
        count(probe.tally, retried);
        await sleep(200);
        retried = await attempt(node, 'POST', probe.path, probe.key, probe.body);
      }
      expect(retried.status, retried.text).toBe(200);
      expect(retried.text).toBe(probe.winner?.text);
      const loaded = await getJson(`${node.url}/v1/namespaces/stall/tables/t0`);
      expect(loaded.metadata['metadata-log']).toHaveLength(1); // the commit, once
      await node.ready();
      await healthy(cluster, db, probe.tally);
    }, 60_000);

    test('SIGTERM under load with keep-alive clients: drains, answers 503 + Retry-After, exits 0 in time', async () => {
      await prepare(cluster, 'drain');
      await setUp(cluster, '/v1/namespaces/drain/tables', { name: 'held', schema });
      const node = cluster.nodes[2] as ClusterNode;
      let inFlight: Promise<Awaited<ReturnType<typeof attempt>>> | undefined;
      let late: Awaited<ReturnType<Awaited<ReturnType<typeof rawRequest>>['end']>> | undefined;
      const tally = await storm(cluster, 'drain', STORM, async () => {
        await sleep(800);
        // A commit in flight on the node when it is told to stop (held on its table's row): it finishes, and
        // the node exits after it.
        const unlock = await db.lockTable('drain', 'held');
        inFlight = attempt(node, 'POST', '/v1/namespaces/drain/tables/held', v7(), commitBody('in-flight'));
        // A connection open on the node whose request arrives during the drain.
        const open = await rawRequest(
          node.port,
          `POST /v1/namespaces HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nIdempotency-Key: ${v7()}\r\nContent-Length: 24\r\n\r\n{"namespace":["late-1"]}`,
        );
        await sleep(200);
        const signalledMs = Date.now();
        const exited = node.signal('SIGTERM');
        totals.terms++;
        await sleep(100);
        late = await open.end();
        await unlock();
        const exit = await exited;
        expect(exit?.code).toBe(0);
        // SHUTDOWN_DRAIN_MS is 3 s; the commit in flight ends well before.
        expect(Date.now() - signalledMs).toBeLessThan(3_000);
        await node.start();
      });
      expect((await inFlight)?.status).toBe(200);
      expect(late?.status).toBe(503);
      expect(late?.retryAfter).toBeDefined();
      expect(late?.connection).toBe('close');
      expect(JSON.parse(late?.body ?? '{}').error).toMatchObject({
        code: 503,
        type: 'ServiceUnavailableException',
      });
      await node.ready();
      await healthy(cluster, db, tally);
    }, 180_000);

    test('purge on all 3 nodes at once, under load: every expired record gone, no node fails', async () => {
      const purging = {
        IDEMPOTENCY_PURGE_ENABLED: 'true',
        IDEMPOTENCY_PURGE_INTERVAL_MS: '300',
        IDEMPOTENCY_PURGE_BATCH_SIZE: '7',
        IDEMPOTENCY_KEY_LIFETIME: 'PT4S',
        IDEMPOTENCY_GRACE_MS: '0',
      };
      for (const node of cluster.nodes) {
        const exit = await node.signal('SIGTERM');
        expect(exit?.code).toBe(0);
      }
      await Promise.all(cluster.nodes.map((node) => node.start(purging)));
      await Promise.all(cluster.nodes.map((node) => node.ready()));
      await db.clearRecords(); // earlier scenarios' records live 30 minutes
      await prepare(cluster, 'purge');
      const tally = await storm(cluster, 'purge', STORM / 2);
      // Every record is past its 4 s lifetime soon after the storm: all gone within 30 s.
      const until = Date.now() + 30_000;
      while ((await db.records()) > 0 && Date.now() < until) await sleep(500);
      expect(await db.records()).toBe(0);
      // (A purge that runs before the node has opened its database meets "not reachable yet": no failure.)
      const failures = cluster.nodes.flatMap((node) =>
        node.output.filter(
          (line) =>
            line.includes('purging idempotency records failed') && !line.includes('not reachable yet'),
        ),
      );
      expect(failures).toEqual([]);
      await healthy(cluster, db, tally);
    }, 180_000);
  });
}
