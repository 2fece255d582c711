import { describe, expect, test } from 'vitest';
import { loadConfig } from '../src/config.js';

// What IDEMPOTENCY_STORE, IDEMPOTENCY_STORE_URL, IDEMPOTENCY_POOL_SIZE and IDEMPOTENCY_STORE_PREFIX resolve to
// (each refusal is in bad-settings.test.ts, as the process prints it).

const store = (env: Record<string, string>) =>
  loadConfig({ DATABASE_URL: 'sqlite::memory:', ...env }).idempotency.store;

describe('the idempotency store settings', () => {
  test('default: the SQL store on the catalog’s own database, fenced by its transaction', () => {
    expect(store({})).toEqual({ kind: 'sql', database: 'catalog', fence: 'transaction' });
    expect(store({ IDEMPOTENCY_STORE: 'sql' })).toEqual({
      kind: 'sql',
      database: 'catalog',
      fence: 'transaction',
    });
  });

  test('sql with a URL: a database of its own (its scheme lower-cased), a pool of 10 unless told, under a lease', () => {
    expect(store({ IDEMPOTENCY_STORE_URL: 'POSTGRESQL://u:pw@db:5433/records' })).toEqual({
      kind: 'sql',
      database: 'separate',
      url: 'postgresql://u:pw@db:5433/records',
      poolSize: 10,
      fence: 'lease',
    });
    expect(
      store({ IDEMPOTENCY_STORE_URL: 'mysql://root@db/records', IDEMPOTENCY_POOL_SIZE: '3' }),
    ).toMatchObject({
      poolSize: 3,
    });
    // Another in-memory SQLite database is another database.
    expect(store({ IDEMPOTENCY_STORE_URL: 'sqlite::memory:' })).toMatchObject({ database: 'separate' });
  });

  test('memory: this process’s, under a lease', () => {
    expect(store({ IDEMPOTENCY_STORE: 'memory' })).toEqual({ kind: 'memory', fence: 'lease' });
  });

  test('redis: standalone as ioredis reads the URL, a cluster from its nodes and credentials', () => {
    expect(store({ IDEMPOTENCY_STORE: 'redis', IDEMPOTENCY_STORE_URL: 'rediss://:pw@cache:6380/2' })).toEqual(
      {
        kind: 'redis',
        connection: { mode: 'standalone', url: 'rediss://:pw@cache:6380/2' },
        prefix: 'idem:catalog:',
        fence: 'lease',
      },
    );
    expect(
      store({
        IDEMPOTENCY_STORE: 'redis',
        IDEMPOTENCY_STORE_URL: 'Redis+Cluster://ops:p%40ss@10.0.0.1:7000,[::1]:7001,cache-3.internal:7002/',
        IDEMPOTENCY_STORE_PREFIX: 'tenant-a:idem:',
      }),
    ).toEqual({
      kind: 'redis',
      connection: {
        mode: 'cluster',
        nodes: [
          { host: '10.0.0.1', port: 7000 },
          { host: '::1', port: 7001 },
          { host: 'cache-3.internal', port: 7002 },
        ],
        username: 'ops',
        password: 'p@ss',
      },
      prefix: 'tenant-a:idem:',
      fence: 'lease',
    });
  });

  test('checked even with idempotency off: a wrong setting is wrong either way', () => {
    expect(() => loadConfig({ IDEMPOTENCY_ENABLED: 'false', IDEMPOTENCY_STORE: 'redis' })).toThrow(
      /IDEMPOTENCY_STORE=redis needs IDEMPOTENCY_STORE_URL/,
    );
  });
});
