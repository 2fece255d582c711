import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { IdempotencyStore } from '@idem/core';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../../src/app.js';
import { loadConfig } from '../../src/config.js';
import { type CatalogDatabase, openDatabase } from '../../src/db.js';

/** One sample of the Prometheus text format. */
export interface Sample {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

const LINE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

/** Parse exposition text as a scraper does; a line that is neither a sample nor a comment fails the test. */
export function parseExposition(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const match = LINE.exec(line);
    if (match === null) throw new Error(`not a sample line: ${JSON.stringify(line)}`);
    const labels: Record<string, string> = {};
    for (const [, name, value] of (match[2] ?? '').matchAll(LABEL)) {
      labels[name as string] = (value as string).replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c));
    }
    samples.push({ name: match[1] as string, labels, value: Number(match[3]) });
  }
  return samples;
}

/** The sum of a series' samples whose labels include `labels`. */
export function total(samples: readonly Sample[], name: string, labels: Record<string, string> = {}): number {
  return samples
    .filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
    .reduce((sum, s) => sum + s.value, 0);
}

/** Switches a test flips on a database: an idempotency store outage, a hung ping, held transactions. */
export interface Faults {
  /** Every idempotency store call fails (connection refused). */
  storeDown: boolean;
  /** `ping` fails at once. */
  pingFails: boolean;
  /** `ping` never answers. */
  pingHangs: boolean;
  /** How many times `ping` was called. */
  pings: number;
  /** While set, catalog transactions wait for it before they start. */
  hold: Promise<void> | undefined;
}

/** The database with fault switches: the store, `ping` and `transaction` can be made to fail or wait. */
function faulty(db: CatalogDatabase, faults: Faults): CatalogDatabase {
  const store = new Proxy(db.store, {
    get(target, property, receiver) {
      const value: unknown = Reflect.get(target, property, receiver);
      if (typeof value !== 'function') return value;
      return async (...args: unknown[]) => {
        if (faults.storeDown) throw new Error('connect ECONNREFUSED 127.0.0.1:5432');
        return value.apply(target, args);
      };
    },
  }) as IdempotencyStore;
  return {
    ...db,
    store,
    ping: async () => {
      faults.pings++;
      if (faults.pingFails) throw new Error('connect ECONNREFUSED');
      if (faults.pingHangs) return new Promise<void>(() => {});
      return db.ping();
    },
    transaction: async (body) => {
      await faults.hold;
      return db.transaction(body);
    },
  };
}

export interface ObservedNode {
  url: string;
  app: FastifyInstance;
  faults: Faults;
  /** A fresh directory for files the test writes (the audit log). */
  dir: string;
  close(): Promise<void>;
}

/** A catalog on an in-memory SQLite database with fault switches, listening on a free port. */
export async function startObservedNode(env: Record<string, string> = {}): Promise<ObservedNode> {
  const dir = mkdtempSync(join(tmpdir(), 'idem-observed-'));
  const config = loadConfig({
    DATABASE_URL: 'sqlite::memory:',
    WAREHOUSE: join(dir, 'warehouse'),
    LOG_LEVEL: 'silent',
    ...env,
  });
  const faults: Faults = { storeDown: false, pingFails: false, pingHangs: false, pings: 0, hold: undefined };
  const db = await openDatabase(config.databaseUrl);
  const app = await buildApp(config, faulty(db, faults));
  const url = await app.listen({ host: '127.0.0.1', port: 0 });
  return {
    url,
    app,
    faults,
    dir,
    async close() {
      faults.pingHangs = false;
      faults.hold = undefined;
      await app.close();
      await db.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A gate: `wait` resolves once `open` is called. */
export function gate(): { wait: Promise<void>; open(): void } {
  let open = () => {};
  const wait = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { wait, open };
}
