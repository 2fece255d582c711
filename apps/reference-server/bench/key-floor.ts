// The least an Idempotency-Key must add to a namespace create in the database, whoever implements it: the
// catalog's own statements for a create, run straight on the driver (no HTTP, no Drizzle, no idem), against the
// same statements with the least a durable key needs, in one transaction with them. The difference is a lower
// bound on what any keyed create costs the server over an unkeyed one, to set against what the goal of 0.8x
// allows (a quarter of an unkeyed create). Run by `pnpm bench` after the catalog's own runs; on its own:
// `tsx bench/key-floor.ts [sqlite,postgres]`.
//
// The least, on each database:
// - SQLite (one connection; `BEGIN IMMEDIATE` holds the file's write lock, so nothing runs in between): the
//   record read by its key inside the transaction, and the completed record written once at the end, into a
//   table that is its primary key alone (`WITHOUT ROWID`, no expiry index). Plus a SHA-256 of the body.
// - PostgreSQL (transactions run at once on many connections): the key reserved before the work (an `INSERT …
//   ON CONFLICT DO NOTHING`, whose row a duplicate waits on), and the answer written into it after the work (an
//   `UPDATE`): two statements, two round trips with node-postgres, which sends one statement at a time.
// Leases, owners, expiry indexes, the read before the transaction (which makes replays cheap) and everything
// in JavaScript are left out: each would only add to the bound.
import { createHash, randomUUID } from 'node:crypto';
import { rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { catalogDdl } from '../src/database/catalog-schema.js';
import { freshPostgres } from '../test/support/databases.js';

/** CPU time (user + system) of this process per transaction, µs: what the bench's server spends too. */
export interface KeyFloor {
  readonly unkeyed: number;
  readonly keyed: number;
}

const ROUNDS = 4;
/** The catalog's pool size by default (DATABASE_POOL_SIZE). */
const POOL_SIZE = 10;
const PREFIX = '';
const PARENT = '["bench"]';
const HEADERS = '{"content-type":"application/json; charset=utf-8"}';

/** The record of the least keyed create, on each database. */
const RECORDS = {
  sqlite: `CREATE TABLE floor_keys (scope text NOT NULL, idem_key text NOT NULL, fingerprint text NOT NULL,
    status integer, headers text, body blob, expires_at_ms integer NOT NULL,
    PRIMARY KEY (scope, idem_key)) WITHOUT ROWID`,
  postgres: `CREATE TABLE floor_keys (scope varchar(255) NOT NULL, idem_key varchar(255) NOT NULL,
    fingerprint varchar(255) NOT NULL, status integer, headers text, body bytea, expires_at_ms bigint NOT NULL,
    PRIMARY KEY (scope, idem_key))`,
};

/** A namespace create's request body and its answer, the n-th of this run. */
function createOf(n: number) {
  const namespace = `["bench","f${n}-${process.pid}"]`;
  return {
    namespace,
    request: `{"namespace":${namespace}}`,
    answer: `{"namespace":${namespace},"properties":{}}`,
  };
}

const fingerprintOf = (body: string) =>
  createHash('sha256').update(`POST /v1/namespaces\n`).update(body).digest('hex');

/** One transaction of a variant, on lane `lane` (its connection, where the database has several). */
type Transaction = (lane: number) => unknown;

/**
 * µs of this process's CPU per transaction, over `count` of them on `width` lanes at once (the catalog's server
 * runs as many transactions at once as its pool has connections).
 */
async function cpuPer(count: number, width: number, one: Transaction): Promise<number> {
  const start = process.cpuUsage();
  const lane = async (index: number) => {
    for (let n = index; n < count; n += width) await one(index);
  };
  await Promise.all(Array.from({ length: width }, (_, index) => lane(index)));
  const used = process.cpuUsage(start);
  return (used.user + used.system) / count;
}

/** Rounds of both variants, alternating which goes first; the mean of each. */
async function rounds(count: number, width: number, unkeyed: Transaction, keyed: Transaction) {
  const figures = { unkeyed: [] as number[], keyed: [] as number[] };
  for (let round = 0; round < ROUNDS; round++) {
    const order = round % 2 === 0 ? (['unkeyed', 'keyed'] as const) : (['keyed', 'unkeyed'] as const);
    for (const name of order)
      figures[name].push(await cpuPer(count, width, name === 'keyed' ? keyed : unkeyed));
  }
  const mean = (values: number[]) => values.reduce((sum, value) => sum + value, 0) / values.length;
  return { unkeyed: mean(figures.unkeyed), keyed: mean(figures.keyed) };
}

async function sqliteFloor(): Promise<KeyFloor> {
  const file = join(tmpdir(), `idem-key-floor-${process.pid}-${Date.now()}.db`);
  const db = new Database(file);
  try {
    db.pragma('journal_mode = WAL'); // as the catalog opens it
    for (const statement of catalogDdl('sqlite')) db.exec(statement);
    db.exec(RECORDS.sqlite);
    db.prepare('INSERT INTO catalog_namespaces VALUES (?, ?, ?)').run(PREFIX, PARENT, '{}');
    const parent = db.prepare('SELECT properties FROM catalog_namespaces WHERE prefix = ? AND namespace = ?');
    const insert = db.prepare(
      'INSERT INTO catalog_namespaces (prefix, namespace, properties) VALUES (?, ?, ?)',
    );
    const read = db.prepare(
      'SELECT status, headers, body, fingerprint FROM floor_keys WHERE scope = ? AND idem_key = ?',
    );
    const record = db.prepare(
      'INSERT INTO floor_keys (scope, idem_key, fingerprint, status, headers, body, expires_at_ms) VALUES (?, ?, ?, ?, ?, ?, ?)',
    );
    let next = 0;
    /** The catalog's create: the parent read twice (its row, then its lock, one statement each), the insert. */
    const work = (namespace: string) => {
      parent.all(PREFIX, PARENT);
      parent.all(PREFIX, PARENT);
      insert.run(PREFIX, namespace, '{}');
    };
    const unkeyed = () => {
      const { namespace } = createOf(next++);
      db.exec('BEGIN IMMEDIATE');
      work(namespace);
      db.exec('COMMIT');
    };
    const keyed = () => {
      const { namespace, request, answer } = createOf(next++);
      const key = randomUUID();
      const fingerprint = fingerprintOf(request);
      db.exec('BEGIN IMMEDIATE');
      if (read.all('principal', key).length > 0) throw new Error('a fresh key was found');
      work(namespace);
      record.run('principal', key, fingerprint, 200, HEADERS, Buffer.from(answer), Date.now() + 86_460_000);
      db.exec('COMMIT');
    };
    await rounds(1_000, 1, unkeyed, keyed); // warm-up
    return await rounds(8_000, 1, unkeyed, keyed);
  } finally {
    db.close();
    for (const suffix of ['', '-wal', '-shm']) rmSync(`${file}${suffix}`, { force: true });
  }
}

async function postgresFloor(): Promise<KeyFloor> {
  const database = await freshPostgres();
  // As many connections as the catalog's pool has by default, each running its own transactions.
  const clients = Array.from({ length: POOL_SIZE }, () => new pg.Client({ connectionString: database.url }));
  try {
    await Promise.all(clients.map((client) => client.connect()));
    const [first] = clients as [pg.Client];
    for (const statement of catalogDdl('postgres')) await first.query(statement);
    await first.query(RECORDS.postgres);
    await first.query('INSERT INTO catalog_namespaces VALUES ($1, $2, $3)', [PREFIX, PARENT, '{}']);
    let next = 0;
    /** The catalog's create: the parent's row, its share lock, the insert (as its statement log shows). */
    const work = async (client: pg.Client, namespace: string) => {
      const parent = 'SELECT properties FROM catalog_namespaces WHERE prefix = $1 AND namespace = $2';
      await client.query(parent, [PREFIX, PARENT]);
      await client.query(`${parent} FOR SHARE`, [PREFIX, PARENT]);
      await client.query(
        'INSERT INTO catalog_namespaces (prefix, namespace, properties) VALUES ($1, $2, $3)',
        [PREFIX, namespace, '{}'],
      );
    };
    const unkeyed = async (lane: number) => {
      const client = clients[lane] as pg.Client;
      const { namespace } = createOf(next++);
      await client.query('BEGIN');
      await work(client, namespace);
      await client.query('COMMIT');
    };
    const keyed = async (lane: number) => {
      const client = clients[lane] as pg.Client;
      const { namespace, request, answer } = createOf(next++);
      const key = randomUUID();
      await client.query('BEGIN');
      const reserved = await client.query(
        'INSERT INTO floor_keys (scope, idem_key, fingerprint, expires_at_ms) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING',
        ['principal', key, fingerprintOf(request), Date.now() + 86_460_000],
      );
      if (reserved.rowCount !== 1) throw new Error('a fresh key was found');
      await work(client, namespace);
      await client.query(
        'UPDATE floor_keys SET status = $3, headers = $4, body = $5 WHERE scope = $1 AND idem_key = $2',
        ['principal', key, 200, HEADERS, Buffer.from(answer)],
      );
      await client.query('COMMIT');
    };
    await rounds(1_000, POOL_SIZE, unkeyed, keyed); // warm-up
    return await rounds(4_000, POOL_SIZE, unkeyed, keyed);
  } finally {
    await Promise.all(clients.map((client) => client.end().catch(() => {})));
    await database.drop();
  }
}

/** The floor on `database` ('sqlite' or 'postgres'). */
export function keyFloor(database: string): Promise<KeyFloor> {
  if (database === 'sqlite') return sqliteFloor();
  if (database === 'postgres') return postgresFloor();
  throw new Error(`no key floor for ${database}`);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  for (const database of (process.argv[2] ?? 'sqlite,postgres').split(',')) {
    const { unkeyed, keyed } = await keyFloor(database);
    console.log(
      `${database}: a create's statements ${unkeyed.toFixed(1)} µs of CPU, with the least a key needs ${keyed.toFixed(1)} µs (+${(keyed - unkeyed).toFixed(1)})`,
    );
  }
}
