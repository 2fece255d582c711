// pnpm bench: @idem/store-sql against the same driver doing the same writes by hand, measured in one run.
//
// For each dialect and 1, 8 and 32 concurrent clients: reserve+finalize pairs per second, and a baseline of a
// plain INSERT followed by an UPDATE of a row of the same size. Then replays (load of a completed record) per
// second, and on PostgreSQL and MariaDB a purge of 1,000,000 expired rows while a reserve+finalize workload
// runs, with its p99 latency compared to the same workload without a purge.
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type IdempotencyStore, purgeExpiredInBatches } from '@idem/core';
import Database from 'better-sqlite3';
import { type SQL, sql } from 'drizzle-orm';
import { drizzle as sqliteDrizzle } from 'drizzle-orm/better-sqlite3';
import { drizzle as mysqlDrizzle } from 'drizzle-orm/mysql2';
import { drizzle as pgDrizzle } from 'drizzle-orm/node-postgres';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { v7 } from 'uuid';
import { machine, perSecond, printTable, ratio } from '../../../scripts/bench.js';
import { createSqlStore, ensureSchema } from '../src/index.js';

const PG_URL = process.env.PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const MYSQL_URL = process.env.MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/test';
const SECONDS = Number(process.env.BENCH_SECONDS ?? 3);
const PURGE_ROWS = Number(process.env.BENCH_PURGE_ROWS ?? 1_000_000);
const BODY = Buffer.alloc(200, 'x');
const RESPONSE = { status: 201, headers: { 'content-type': 'application/json' }, body: BODY };

interface Backend {
  name: string;
  store: IdempotencyStore;
  /** Run one raw statement through the same driver. */
  exec(statement: SQL): Promise<unknown>;
  table: string;
  close(): Promise<void>;
}

/** Run `worker` on `clients` concurrent loops for SECONDS; return operations per second and latencies. */
async function load(clients: number, seconds: number, worker: () => Promise<void>) {
  const deadline = performance.now() + seconds * 1_000;
  const latencies: number[] = [];
  await Promise.all(
    Array.from({ length: clients }, async () => {
      while (performance.now() < deadline) {
        const start = performance.now();
        await worker();
        latencies.push(performance.now() - start);
      }
    }),
  );
  latencies.sort((a, b) => a - b);
  return {
    perSecond: latencies.length / seconds,
    p99Ms: latencies[Math.floor(latencies.length * 0.99)] ?? Number.NaN,
  };
}

const nowMs = Date.now();
const reservePair = (store: IdempotencyStore) => async () => {
  const key = v7();
  const owner = randomUUID();
  const ref = { scope: 'bench', key };
  await store.reserve({
    ...ref,
    fingerprint: 'f'.repeat(64),
    owner,
    nowMs,
    leaseUntilMs: nowMs + 30_000,
    expiresAtMs: nowMs + 3_600_000,
  });
  if (!(await store.finalize({ ...ref, owner, response: RESPONSE, nowMs }))) throw new Error('finalize lost');
};

// The same row, written the plain way: an INSERT of the in-flight row, an UPDATE storing the response.
const baselinePair = (backend: Backend) => async () => {
  const key = v7();
  const owner = randomUUID();
  const t = sql.identifier(backend.table);
  await backend.exec(sql`INSERT INTO ${t} (scope, idem_key, fingerprint, owner, lease_until_ms, body_omitted,
    created_at_ms, updated_at_ms, expires_at_ms)
    VALUES ('bench', ${key}, ${'f'.repeat(64)}, ${owner}, ${nowMs + 30_000}, ${backend.name === 'SQLite file' ? 0 : false},
    ${nowMs}, ${nowMs}, ${nowMs + 3_600_000})`);
  await backend.exec(sql`UPDATE ${t} SET owner = NULL, response_status = 201,
    response_headers = ${'{"content-type":"application/json"}'}, response_body = ${BODY}, updated_at_ms = ${nowMs}
    WHERE scope = 'bench' AND idem_key = ${key} AND owner = ${owner} AND response_status IS NULL`);
};

async function postgres(pool: number): Promise<Backend> {
  const client = new pg.Pool({ connectionString: PG_URL, max: pool });
  const db = pgDrizzle(client);
  const table = `idem_bench_${randomUUID().slice(0, 8)}`;
  await ensureSchema(db, { dialect: 'postgres', table });
  return {
    name: 'PostgreSQL',
    store: createSqlStore(db, { dialect: 'postgres', table }),
    exec: (s) => db.execute(s),
    table,
    close: async () => {
      await db.execute(sql`DROP TABLE ${sql.identifier(table)}`);
      await client.end();
    },
  };
}

async function mariadb(pool: number): Promise<Backend> {
  const client = mysql.createPool({ uri: MYSQL_URL, connectionLimit: pool });
  const db = mysqlDrizzle(client);
  const table = `idem_bench_${randomUUID().slice(0, 8)}`;
  await ensureSchema(db, { dialect: 'mysql', table });
  return {
    name: 'MariaDB',
    store: createSqlStore(db, { dialect: 'mysql', table }),
    exec: (s) => db.execute(s),
    table,
    close: async () => {
      await db.execute(sql`DROP TABLE ${sql.identifier(table)}`);
      await client.end();
    },
  };
}

async function sqliteFile(): Promise<Backend> {
  const dir = mkdtempSync(join(tmpdir(), 'idem-bench-'));
  const connection = new Database(join(dir, 'bench.db'));
  connection.pragma('journal_mode = WAL');
  connection.pragma('synchronous = NORMAL');
  const db = sqliteDrizzle(connection);
  await ensureSchema(db, { dialect: 'sqlite' });
  return {
    name: 'SQLite file',
    store: createSqlStore(db, { dialect: 'sqlite' }),
    exec: async (s) => db.run(s),
    table: 'idem_records',
    close: async () => {
      connection.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

async function throughput(make: (pool: number) => Promise<Backend>) {
  const rows: [string, string][] = [];
  for (const clients of [1, 8, 32]) {
    const backend = await make(clients);
    // Alternate the two so that drift (autovacuum, caches) hits both alike.
    let store = 0;
    let base = 0;
    for (let round = 0; round < 2; round++) {
      base += (await load(clients, SECONDS / 2, baselinePair(backend))).perSecond;
      store += (await load(clients, SECONDS / 2, reservePair(backend.store))).perSecond;
    }
    rows.push([
      `${backend.name}, ${clients} client${clients > 1 ? 's' : ''}`,
      `${perSecond(store / 2)} pairs vs ${perSecond(base / 2)} INSERT+UPDATE = ${ratio(store / base)}`,
    ]);
    if (clients === 8) {
      const ref = { scope: 'bench', key: v7() };
      const owner = randomUUID();
      await backend.store.reserve({
        ...ref,
        fingerprint: 'f',
        owner,
        nowMs,
        leaseUntilMs: nowMs + 1,
        expiresAtMs: nowMs + 3_600_000,
      });
      await backend.store.finalize({ ...ref, owner, response: RESPONSE, nowMs });
      const replay = await load(clients, SECONDS, async () => {
        if ((await backend.store.load(ref))?.response == null) throw new Error('no replay');
      });
      rows.push([`${backend.name}, replays (load), 8 clients`, perSecond(replay.perSecond)]);
    }
    await backend.close();
  }
  return rows;
}

async function purge(make: (pool: number) => Promise<Backend>, seed: (b: Backend) => Promise<void>) {
  const backend = await make(9);
  await seed(backend);
  const quiet = await load(8, SECONDS, reservePair(backend.store));
  const started = performance.now();
  let purgeMs = 0;
  let purged = 0;
  const purging = purgeExpiredInBatches(backend.store, {
    beforeMs: nowMs,
    batchSize: 5_000,
    maxBatches: 10_000,
  }).then((result) => {
    purgeMs = performance.now() - started;
    purged = result.count;
  });
  const busy = await load(8, SECONDS, reservePair(backend.store));
  await purging;
  await backend.close();
  return [
    [
      `${backend.name}, purge of ${PURGE_ROWS.toLocaleString('en-US')} expired rows`,
      `${(purgeMs / 1000).toFixed(1)} s (${purged.toLocaleString('en-US')} deleted, batches of 5,000)`,
    ],
    [
      `${backend.name}, reserve+finalize p99 without / during purge`,
      `${quiet.p99Ms.toFixed(1)} ms / ${busy.p99Ms.toFixed(1)} ms = ${ratio(busy.p99Ms / quiet.p99Ms)}`,
    ],
  ] as [string, string][];
}

console.log(`machine: ${machine()}`);
const rows: [string, string][] = [];
// BENCH_DIALECTS=postgres,mariadb,sqlite picks a subset; BENCH_PURGE_ROWS=0 skips the purge runs.
const chosen = (process.env.BENCH_DIALECTS ?? 'postgres,mariadb,sqlite').split(',');
const makers = { postgres, mariadb, sqlite: async () => sqliteFile() };
for (const [name, make] of Object.entries(makers))
  if (chosen.includes(name)) rows.push(...(await throughput(make)));
printTable('@idem/store-sql: reserve+finalize against INSERT+UPDATE with the same driver', rows);

const purgeRows =
  PURGE_ROWS === 0
    ? []
    : [
        ...(await purge(postgres, async (b) => {
          await b.exec(sql`INSERT INTO ${sql.identifier(b.table)} (scope, idem_key, fingerprint, owner, lease_until_ms,
      response_status, response_headers, response_body, body_omitted, created_at_ms, updated_at_ms, expires_at_ms)
      SELECT 'old', 'k' || g, 'f', NULL, 0, 200, '{}', ${BODY}, false, 0, 0, ${nowMs - 1}
      FROM generate_series(1, ${PURGE_ROWS}) AS g`);
        })),
        ...(await purge(mariadb, async (b) => {
          await b.exec(sql`INSERT INTO ${sql.identifier(b.table)} (scope, idem_key, fingerprint, owner, lease_until_ms,
      response_status, response_headers, response_body, body_omitted, created_at_ms, updated_at_ms, expires_at_ms)
      SELECT 'old', CONCAT('k', seq), 'f', NULL, 0, 200, '{}', ${BODY}, FALSE, 0, 0, ${nowMs - 1}
      FROM ${sql.raw(`seq_1_to_${PURGE_ROWS}`)}`);
        })),
      ];
printTable('@idem/store-sql: purge under load', purgeRows);
