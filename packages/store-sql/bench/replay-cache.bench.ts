// pnpm bench: replays on PostgreSQL with and without @idem/store-memory's withReplayCache in front of the store,
// measured side by side in one run. A replay is what the coordinator asks for when a retry arrives: a reserve
// of a key whose record is completed. 1, 8 and 32 concurrent callers on one pool of as many connections.
import { randomUUID } from 'node:crypto';
import type { IdempotencyStore } from '@idem/core';
import { withReplayCache } from '@idem/store-memory';
import { sql } from 'drizzle-orm';
import { drizzle } from 'drizzle-orm/node-postgres';
import pg from 'pg';
import { v7 } from 'uuid';
import { machine, perSecond, printTable, ratio } from '../../../scripts/bench.js';
import { createSqlStore, ensureSchema } from '../src/index.js';

const PG_URL = process.env.PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const SECONDS = Number(process.env.BENCH_SECONDS ?? 3);
const KEYS = 100; // replays spread over this many completed records
const nowMs = Date.now();

async function load(callers: number, seconds: number, worker: () => Promise<void>): Promise<number> {
  const deadline = performance.now() + seconds * 1_000;
  let done = 0;
  await Promise.all(
    Array.from({ length: callers }, async () => {
      while (performance.now() < deadline) {
        await worker();
        done++;
      }
    }),
  );
  return done / seconds;
}

console.log(`machine: ${machine()}`);
const rows: [string, string][] = [];
for (const callers of [1, 8, 32]) {
  const pool = new pg.Pool({ connectionString: PG_URL, max: callers });
  const db = drizzle(pool);
  const table = `idem_bench_${randomUUID().slice(0, 8)}`;
  await ensureSchema(db, { dialect: 'postgres', table });
  const store = createSqlStore(db, { dialect: 'postgres', table });
  const cached = withReplayCache(store, { maxEntries: 10_000 });
  const refs = Array.from({ length: KEYS }, () => ({ scope: 'bench', key: v7() }));
  for (const ref of refs) {
    const owner = randomUUID();
    const params = {
      ...ref,
      fingerprint: 'f'.repeat(64),
      owner,
      nowMs,
      leaseUntilMs: nowMs + 1,
      expiresAtMs: nowMs + 3_600_000,
    };
    await store.reserve(params);
    const response = {
      status: 201,
      headers: { 'content-type': 'application/json' },
      body: Buffer.alloc(200, 'x'),
    };
    await store.finalize({ ...ref, owner, response, nowMs });
  }
  let i = 0;
  const replay = (s: IdempotencyStore) => async () => {
    const ref = refs[i++ % KEYS] as { scope: string; key: string };
    const result = await s.reserve({
      ...ref,
      fingerprint: 'f'.repeat(64),
      owner: randomUUID(),
      nowMs,
      leaseUntilMs: nowMs,
      expiresAtMs: nowMs,
    });
    if (result.outcome !== 'exists' || result.record.response === null) throw new Error('no replay');
  };
  let plain = 0;
  let withCache = 0;
  for (let round = 0; round < 2; round++) {
    plain += await load(callers, SECONDS / 2, replay(store));
    withCache += await load(callers, SECONDS / 2, replay(cached));
  }
  rows.push([
    `${callers} caller${callers > 1 ? 's' : ''}`,
    `${perSecond(withCache / 2)} with the cache vs ${perSecond(plain / 2)} without = ${ratio(withCache / plain)}`,
  ]);
  await db.execute(sql`DROP TABLE ${sql.identifier(table)}`);
  await pool.end();
}
printTable('PostgreSQL replays (reserve of a completed record), withReplayCache vs the store alone', rows);
