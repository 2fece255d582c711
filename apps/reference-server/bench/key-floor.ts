// What the least key statements add to a namespace create in the database: the catalog's own statements for a
// create, run straight on the driver (no HTTP, no Drizzle, no idem), against the same statements with the least a
// durable key needs, in one transaction with them. Set against what the goal of 0.8x allows (a quarter of an
// unkeyed create's CPU), it shows how much room the goal leaves for everything else a key needs. Run by
// `pnpm bench` after the catalog's own runs; on its own: `tsx bench/key-floor.ts [sqlite,postgres]`.
//
// The key statements, on each database:
// - SQLite (one connection; `BEGIN IMMEDIATE` holds the file's write lock, so nothing runs in between): the
//   completed record inserted once at the end, into a table that is its primary key alone (`WITHOUT ROWID`, no
//   expiry index). A duplicate would fail that insert, roll back and replay: no read is needed before it.
// - PostgreSQL (transactions at once on many connections): the key reserved before the work (an `INSERT … ON
//   CONFLICT DO NOTHING`, whose row a duplicate waits on), and the answer written into it after the work (an
//   `UPDATE`). Measured twice: awaited one by one, as node-postgres sends statements unless told otherwise (two
//   more round trips), and pipelined (`pg`'s `pipeline` option: the reservation sent with `BEGIN`, the answer
//   with `COMMIT`, no round trip added).
// Each with a SHA-256 of the body. Leases, owners, expiry indexes, the read before the transaction (which makes
// replays cheap) and everything else in JavaScript are left out. These are measured statements, not a proof
// that nothing cheaper exists; each figure is this process's CPU per transaction, not the server's: under
// `pnpm bench` the load generator's process, pinned to its core by catalog-load.ts; on its own, unpinned.
import { createHash } from 'node:crypto';
import { rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { v7 } from 'uuid';
import { SEPARATOR } from '../src/catalog/repository.js';
import { catalogDdl } from '../src/database/catalog-schema.js';
import { freshPostgres } from '../test/support/databases.js';

/** CPU time (user + system) of this process per transaction, µs. */
export interface KeyFloor {
  /** The catalog's statements for a create. */
  readonly unkeyed: number;
  /** With the key statements, awaited one by one. */
  readonly keyed: number;
  /** With the key statements pipelined with `BEGIN` and `COMMIT` (PostgreSQL). */
  readonly pipelined?: number;
}

type Variant = keyof KeyFloor;

const ROUNDS = 4;
/** The catalog's pool size by default (DATABASE_POOL_SIZE). */
const POOL_SIZE = 10;
const PREFIX = '';
const PARENT = 'bench';
const HEADERS = '{"content-type":"application/json; charset=utf-8"}';
const SCOPE = 'principal';

/** The record of the least keyed create, on each database. */
const RECORDS = {
  sqlite: `CREATE TABLE floor_keys (scope text NOT NULL, idem_key text NOT NULL, fingerprint text NOT NULL,
    status integer, headers text, body blob, expires_at_ms integer NOT NULL,
    PRIMARY KEY (scope, idem_key)) WITHOUT ROWID`,
  postgres: `CREATE TABLE floor_keys (scope varchar(255) NOT NULL, idem_key varchar(255) NOT NULL,
    fingerprint varchar(255) NOT NULL, status integer, headers text, body bytea, expires_at_ms bigint NOT NULL,
    PRIMARY KEY (scope, idem_key))`,
};

/** The n-th create of this run: its namespace as the catalog stores it, its request body and its answer. */
function createOf(n: number) {
  const name = `f${n}-${process.pid}`;
  const parts = `["${PARENT}","${name}"]`;
  return {
    namespace: `${PARENT}${SEPARATOR}${name}`,
    request: `{"namespace":${parts}}`,
    answer: `{"namespace":${parts},"properties":{}}`,
  };
}

const fingerprintOf = (body: string) =>
  createHash('sha256').update(`POST /v1/namespaces\n`).update(body).digest('hex');
const expiresAt = () => Date.now() + 86_460_000;

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

/** Rounds of every variant, the order turned round each round; the mean of each. */
async function rounds<V extends Variant>(
  count: number,
  width: number,
  variants: Record<V, Transaction>,
): Promise<Record<V, number>> {
  const names = Object.keys(variants) as V[];
  const figures = new Map<V, number[]>(names.map((name) => [name, []]));
  for (let round = 0; round < ROUNDS; round++) {
    for (const name of round % 2 === 0 ? names : [...names].reverse())
      figures.get(name)?.push(await cpuPer(count, width, variants[name]));
  }
  const mean = (values: number[]) => values.reduce((sum, value) => sum + value, 0) / values.length;
  return Object.fromEntries(names.map((name) => [name, mean(figures.get(name) ?? [])])) as Record<V, number>;
}

async function sqliteFloor(): Promise<KeyFloor> {
  const file = join(tmpdir(), `idem-key-floor-${process.pid}-${Date.now()}.db`);
  const db = new Database(file);
  try {
    db.pragma('journal_mode = WAL'); // as the catalog opens it
    for (const statement of catalogDdl('sqlite')) db.exec(statement);
    db.exec(RECORDS.sqlite);
    db.prepare('INSERT INTO catalog_namespaces VALUES (?, ?, ?)').run(PREFIX, PARENT, '{}');
    const read = db.prepare('SELECT properties FROM catalog_namespaces WHERE prefix = ? AND namespace = ?');
    const insert = db.prepare(
      'INSERT INTO catalog_namespaces (prefix, namespace, properties) VALUES (?, ?, ?)',
    );
    const record = db.prepare(
      'INSERT INTO floor_keys (scope, idem_key, fingerprint, status, headers, body, expires_at_ms) VALUES (?, ?, ?, ?, ?, ?, ?)',
    );
    let next = 0;
    /** The catalog's create: the new namespace looked up (a miss), its parent read, the insert. */
    const work = (namespace: string) => {
      if (read.all(PREFIX, namespace).length > 0) throw new Error('the namespace exists');
      read.all(PREFIX, PARENT);
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
      const key = v7();
      const fingerprint = fingerprintOf(request);
      db.exec('BEGIN IMMEDIATE');
      work(namespace);
      record.run(SCOPE, key, fingerprint, 200, HEADERS, Buffer.from(answer), expiresAt());
      db.exec('COMMIT');
    };
    await rounds(1_000, 1, { unkeyed, keyed }); // warm-up
    return await rounds(8_000, 1, { unkeyed, keyed });
  } finally {
    db.close();
    for (const suffix of ['', '-wal', '-shm']) rmSync(`${file}${suffix}`, { force: true });
  }
}

async function postgresFloor(): Promise<KeyFloor> {
  const database = await freshPostgres();
  // As many connections as the catalog's pool has by default, each running its own transactions; in pipeline
  // mode, which sends each statement at once and changes nothing for one awaited before the next is sent.
  const clients = Array.from(
    { length: POOL_SIZE },
    () => new pg.Client({ connectionString: database.url, pipeline: true }),
  );
  try {
    await Promise.all(clients.map((client) => client.connect()));
    const [first] = clients as [pg.Client];
    for (const statement of catalogDdl('postgres')) await first.query(statement);
    await first.query(RECORDS.postgres);
    await first.query('INSERT INTO catalog_namespaces VALUES ($1, $2, $3)', [PREFIX, PARENT, '{}']);
    let next = 0;
    const read = 'SELECT properties FROM catalog_namespaces WHERE prefix = $1 AND namespace = $2';
    /** The catalog's create: the new namespace looked up (a miss), its parent share-locked, the insert. */
    const work = async (client: pg.Client, namespace: string) => {
      if ((await client.query(read, [PREFIX, namespace])).rowCount !== 0)
        throw new Error('the namespace exists');
      await client.query(`${read} FOR SHARE`, [PREFIX, PARENT]);
      await client.query(
        'INSERT INTO catalog_namespaces (prefix, namespace, properties) VALUES ($1, $2, $3)',
        [PREFIX, namespace, '{}'],
      );
    };
    const reserve = (client: pg.Client, key: string, request: string) =>
      client.query(
        'INSERT INTO floor_keys (scope, idem_key, fingerprint, expires_at_ms) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING',
        [SCOPE, key, fingerprintOf(request), expiresAt()],
      );
    const answer = (client: pg.Client, key: string, body: string) =>
      client.query(
        'UPDATE floor_keys SET status = $3, headers = $4, body = $5 WHERE scope = $1 AND idem_key = $2',
        [SCOPE, key, 200, HEADERS, Buffer.from(body)],
      );
    const unkeyed = async (lane: number) => {
      const client = clients[lane] as pg.Client;
      const { namespace } = createOf(next++);
      await client.query('BEGIN');
      await work(client, namespace);
      await client.query('COMMIT');
    };
    const keyed = async (lane: number) => {
      const client = clients[lane] as pg.Client;
      const create = createOf(next++);
      const key = v7();
      await client.query('BEGIN');
      if ((await reserve(client, key, create.request)).rowCount !== 1)
        throw new Error('a fresh key was found');
      await work(client, create.namespace);
      await answer(client, key, create.answer);
      await client.query('COMMIT');
    };
    const pipelined = async (lane: number) => {
      const client = clients[lane] as pg.Client;
      const create = createOf(next++);
      const key = v7();
      const [, reserved] = await Promise.all([client.query('BEGIN'), reserve(client, key, create.request)]);
      if (reserved.rowCount !== 1) throw new Error('a fresh key was found');
      await work(client, create.namespace);
      const [answered, committed] = await Promise.all([
        answer(client, key, create.answer),
        client.query('COMMIT'),
      ]);
      if (answered.rowCount !== 1 || committed.command !== 'COMMIT')
        throw new Error('the answer was not kept');
    };
    await rounds(1_000, POOL_SIZE, { unkeyed, keyed, pipelined }); // warm-up
    return await rounds(4_000, POOL_SIZE, { unkeyed, keyed, pipelined });
  } finally {
    await Promise.all(clients.map((client) => client.end().catch(() => {})));
    // Not thrown over an error of the measurement, which says more.
    await database.drop().catch((error: unknown) => console.warn(`could not drop ${database.url}: ${error}`));
  }
}

/** The figures on `database` ('sqlite' or 'postgres'). */
export function keyFloor(database: string): Promise<KeyFloor> {
  if (database === 'sqlite') return sqliteFloor();
  if (database === 'postgres') return postgresFloor();
  throw new Error(`no key floor for ${database}`);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  for (const database of (process.argv[2] ?? 'sqlite,postgres').split(',')) {
    const { unkeyed, keyed, pipelined } = await keyFloor(database);
    const added = (with_: number) => `${with_.toFixed(1)} µs (+${(with_ - unkeyed).toFixed(1)})`;
    console.log(
      `${database}: a create's statements ${unkeyed.toFixed(1)} µs of CPU; with the key statements ${added(keyed)}${pipelined === undefined ? '' : `, pipelined ${added(pipelined)}`}`,
    );
  }
}
