import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { ensureSchema, schemaStatements } from '@idem/store-sql';
import { sql } from 'drizzle-orm';
import { drizzle as mysqlDrizzle } from 'drizzle-orm/mysql2';
import { drizzle as pgDrizzle } from 'drizzle-orm/node-postgres';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { describe, expect, test } from 'vitest';
import { migrations } from '../src/migrations.generated.js';
import { MYSQL_URL, mysqlUp, PG_URL, pgUp, uniqueTable } from './support/backends.js';

const packageDir = new URL('..', import.meta.url).pathname;

describe('shipped migrations', () => {
  test('ensureSchema embeds exactly the SQL files drizzle-kit generated', () => {
    for (const [dialect, dir] of [
      ['postgres', 'postgres'],
      ['mysql', 'mysql'],
      ['sqlite', 'sqlite'],
    ] as const) {
      const files = readdirSync(`${packageDir}drizzle/${dir}`)
        .filter((f) => f.endsWith('.sql'))
        .sort();
      expect(migrations[dialect]).toEqual(
        files.map((f) => readFileSync(`${packageDir}drizzle/${dir}/${f}`, 'utf8')),
      );
    }
  });

  test('the migrations are up to date with the schema (drizzle-kit finds nothing to generate)', () => {
    for (const [dialect, dir] of [
      ['postgresql', 'postgres'],
      ['mysql', 'mysql'],
      ['sqlite', 'sqlite'],
    ]) {
      const output = execFileSync(
        `${packageDir}node_modules/.bin/drizzle-kit`,
        ['generate', `--dialect=${dialect}`, `--schema=./src/schema/${dir}.ts`, `--out=./drizzle/${dir}`],
        { cwd: packageDir, encoding: 'utf8' },
      );
      expect(output).toContain('No schema changes');
    }
  }, 60_000);

  test('a custom table name renames the table, its key and its index, and nothing else', () => {
    const statements = schemaStatements('postgres', 'orders_idem').join('\n');
    expect(statements).toContain('CREATE TABLE IF NOT EXISTS "orders_idem"');
    expect(statements).toContain('"orders_idem_expires_idx"');
    expect(statements).not.toContain('idem_records');
  });
});

describe.runIf(await pgUp())('ensureSchema on PostgreSQL', () => {
  test('is idempotent and safe when many nodes run it at once', async () => {
    const table = uniqueTable();
    const pools = Array.from({ length: 4 }, () => new pg.Pool({ connectionString: PG_URL, max: 1 }));
    try {
      await Promise.all(pools.map((pool) => ensureSchema(pgDrizzle(pool), { dialect: 'postgres', table })));
      await ensureSchema(pgDrizzle(pools[0] as pg.Pool), { dialect: 'postgres', table });
      const { rows } = await (pools[0] as pg.Pool).query(
        'SELECT indexname FROM pg_indexes WHERE tablename = $1',
        [table],
      );
      expect(rows.map((r) => r.indexname).sort()).toEqual([
        `${table}_expires_idx`,
        `${table}_scope_idem_key_pk`,
      ]);
    } finally {
      await pgDrizzle(pools[0] as pg.Pool).execute(sql`DROP TABLE IF EXISTS ${sql.identifier(table)}`);
      await Promise.all(pools.map((pool) => pool.end()));
    }
  });
});

describe.runIf(await mysqlUp())('ensureSchema on MariaDB', () => {
  test('is idempotent and safe when many nodes run it at once', async () => {
    const table = uniqueTable();
    const pools = Array.from({ length: 4 }, () => mysql.createPool({ uri: MYSQL_URL, connectionLimit: 1 }));
    try {
      await Promise.all(pools.map((pool) => ensureSchema(mysqlDrizzle(pool), { dialect: 'mysql', table })));
      await ensureSchema(mysqlDrizzle(pools[0] as mysql.Pool), { dialect: 'mysql', table });
      const [rows] = await (pools[0] as mysql.Pool).query(`SHOW INDEX FROM ${table}`);
      expect(new Set((rows as { Key_name: string }[]).map((r) => r.Key_name))).toEqual(
        new Set(['PRIMARY', `${table}_expires_idx`]),
      );
    } finally {
      await (pools[0] as mysql.Pool).query(`DROP TABLE IF EXISTS ${table}`);
      await Promise.all(pools.map((pool) => pool.end()));
    }
  });
});
