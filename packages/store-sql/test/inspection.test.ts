import { randomUUID } from 'node:crypto';
import {
  decodeRecordCursor,
  type IdempotencyStore,
  IdemStoreLimitError,
  type ListParams,
  MAX_LIST_LIMIT,
  type RecordPage,
} from '@idem/core';
import { createSqlStore, type DialectName, ensureSchema, type SupportedDb, sqlRows } from '@idem/store-sql';
import Database from 'better-sqlite3';
import { type SQL, sql } from 'drizzle-orm';
import { drizzle as sqliteDrizzle } from 'drizzle-orm/better-sqlite3';
import { MySqlDialect } from 'drizzle-orm/mysql-core';
import { PgDialect } from 'drizzle-orm/pg-core';
import { SQLiteSyncDialect } from 'drizzle-orm/sqlite-core';
import { describe, expect, test, vi } from 'vitest';
import { mysql } from '../src/dialects/mysql.js';
import { postgres } from '../src/dialects/postgres.js';
import { sqlite } from '../src/dialects/sqlite.js';
import { listStatement } from '../src/inspection.js';
import { mysqlTable, mysqlUp, pgTable, pgUp } from './support/backends.js';

// What the kit cannot see from outside: the order is the database's (the cursor is compared by it, in the
// columns' collation), a page is one indexed range read, bodies stay in the table unless asked for, and each
// call is one statement. The kit runs on every backend in conformance-*.test.ts.

const NOW_MS = Date.UTC(2030, 0, 1);
const id = sql.identifier;

/** The store's calls these tests make, whatever its dialect. */
type AnySqlStore = Required<Pick<IdempotencyStore, 'reserve' | 'finalize' | 'forget' | 'list' | 'stats'>>;

interface Opened {
  readonly dialect: DialectName;
  readonly db: SupportedDb;
  readonly table: string;
  readonly store: AnySqlStore;
  /** The client's methods that send a statement, to count them. */
  readonly client: object;
  readonly sends: readonly string[];
  close(): Promise<void>;
}

const backends: readonly (readonly [string, boolean, () => Promise<Opened>])[] = [
  [
    'SQLite (better-sqlite3)',
    true,
    async () => {
      const connection = new Database(':memory:');
      const db = sqliteDrizzle(connection);
      await ensureSchema(db, { dialect: 'sqlite' });
      return {
        dialect: 'sqlite',
        db,
        table: 'idem_records',
        store: createSqlStore(db, { dialect: 'sqlite' }),
        client: connection,
        sends: ['prepare'],
        close: async () => void connection.close(),
      };
    },
  ],
  [
    'PostgreSQL (node-postgres)',
    await pgUp(),
    async () => {
      const { table, pool, db, store, drop } = await pgTable(4);
      return { dialect: 'postgres', db, table, store, client: pool, sends: ['query'], close: () => drop() };
    },
  ],
  [
    'MariaDB/MySQL (mysql2)',
    await mysqlUp(),
    async () => {
      const { table, pool, db, store, drop } = await mysqlTable(4);
      return {
        dialect: 'mysql',
        db,
        table,
        store,
        client: pool,
        sends: ['query', 'execute'],
        close: () => drop(),
      };
    },
  ],
];

/** Reserve each (scope, key), 50 at a time; completed when `complete` is set. */
async function write(store: AnySqlStore, refs: readonly (readonly [string, string])[], complete = false) {
  for (let i = 0; i < refs.length; i += 50) {
    await Promise.all(
      refs.slice(i, i + 50).map(async ([scope, key]) => {
        const owner = randomUUID();
        const p = { scope, key, fingerprint: 'f', owner, nowMs: NOW_MS };
        await store.reserve({ ...p, leaseUntilMs: NOW_MS + 30_000, expiresAtMs: NOW_MS + 60_000 });
        if (complete) {
          const response = { status: 200, headers: {}, body: new Uint8Array([1, 2, 3]) };
          await store.finalize({ scope, key, owner, response, nowMs: NOW_MS });
        }
      }),
    );
  }
}

/** Page from the start (or `cursor`) to the end; every (scope, key) listed, in order, and the page count. */
async function pagesOf(store: AnySqlStore, params: Omit<ListParams, 'nowMs'>, between?: () => void) {
  const refs: string[] = [];
  let pages = 0;
  let cursor = params.cursor;
  for (;;) {
    const page: RecordPage = await store.list({
      ...params,
      nowMs: NOW_MS,
      ...(cursor === undefined ? {} : { cursor }),
    });
    pages++;
    expect(page.records.length).toBeLessThanOrEqual(params.limit);
    refs.push(...page.records.map((r) => JSON.stringify([r.scope, r.key])));
    if (page.cursor === null) return { refs, pages };
    cursor = page.cursor;
    between?.();
  }
}

/** The (scope, key) of every row, as the database orders them (MySQL hands VARBINARY out as Buffers). */
async function orderedByDatabase(opened: Pick<Opened, 'db' | 'table'>, scope?: string): Promise<string[]> {
  const where = scope === undefined ? sql`` : sql`WHERE ${id('scope')} = ${scope}`;
  const rows = await sqlRows(
    opened.db,
    sql`SELECT ${id('scope')}, ${id('idem_key')} FROM ${id(opened.table)} ${where}
      ORDER BY ${id('scope')}, ${id('idem_key')}`,
  );
  return rows.map((row) => JSON.stringify([String(row.scope), String(row.idem_key)]));
}

// Code units, code points and bytes disagree on these: U+FFFF is one UTF-16 unit above a surrogate pair's first
// (so JS sorts the emoji first) but its 3 UTF-8 bytes sort before the emoji's 4; and case, accents, punctuation.
const AWKWARD = [
  '\uffff',
  '\u{1F600}',
  '\u00e9',
  'e\u0301',
  'z',
  'a',
  'B',
  '_',
  '%',
  '-x',
  ' ',
  '\\',
  "'",
  'k',
];

for (const [name, up, open] of backends) {
  describe.runIf(up)(`${name}: list, stats and forget`, () => {
    const withOpened = (body: (opened: Opened) => Promise<void>) => async () => {
      const opened = await open();
      try {
        await body(opened);
      } finally {
        await opened.close();
      }
    };

    test(
      'an empty table lists nothing and counts nothing',
      withOpened(async ({ store }) => {
        expect(await store.list({ limit: 1, nowMs: NOW_MS })).toEqual({ records: [], cursor: null });
        expect(
          await store.list({ limit: MAX_LIST_LIMIT, nowMs: NOW_MS, bodies: true, state: 'expired' }),
        ).toEqual({ records: [], cursor: null });
        expect(await store.stats({ nowMs: NOW_MS })).toEqual({
          inFlight: 0,
          leaseLapsed: 0,
          completed: 0,
          expired: 0,
          oldestInFlightCreatedAtMs: null,
        });
        expect(await store.forget({ scope: 's', key: 'k' })).toBe(false);
      }),
    );

    test(
      'keys whose bytes, code units and code points sort apart page exactly once, in the database’s order',
      withOpened(async (opened) => {
        const { store } = opened;
        const scopes = ['s\uffff', 's\u{1F600}', 's', 'S', 's_', 's%'];
        await write(
          store,
          scopes.flatMap((scope) => AWKWARD.map((key) => [scope, key] as const)),
        );
        const everything = await orderedByDatabase(opened);
        expect(everything.length).toBe(scopes.length * AWKWARD.length);
        for (const limit of [1, 2, 5]) {
          expect((await pagesOf(store, { limit })).refs).toEqual(everything);
        }
        for (const scope of scopes) {
          const inScope = await orderedByDatabase(opened, scope);
          expect(inScope.length).toBe(AWKWARD.length);
          expect((await pagesOf(store, { scope, limit: 1 })).refs).toEqual(inScope);
          expect((await pagesOf(store, { scope, limit: 3 })).refs).toEqual(inScope);
        }
      }),
    );

    test(
      'pages of 1,000: 2,100 records in three pages, exactly 1,000 in one page with a null cursor',
      withOpened(async ({ store }) => {
        const big = `big-${randomUUID()}`;
        await write(
          store,
          Array.from({ length: 2_100 }, (_, i) => [big, `k${i}`] as const),
        );
        const { refs, pages } = await pagesOf(store, { scope: big, limit: MAX_LIST_LIMIT });
        expect(pages).toBe(3);
        expect(new Set(refs).size).toBe(2_100);
        const exact = `exact-${randomUUID()}`;
        await write(
          store,
          Array.from({ length: 1_000 }, (_, i) => [exact, `k${i}`] as const),
        );
        const page = await store.list({ scope: exact, limit: MAX_LIST_LIMIT, nowMs: NOW_MS, bodies: true });
        expect(page.records.length).toBe(1_000);
        expect(page.cursor).toBeNull();
      }),
    );

    test(
      'records written and deleted while paging: each record present throughout is listed exactly once',
      withOpened(async ({ store }) => {
        const scope = `busy-${randomUUID()}`;
        const keys = Array.from({ length: 300 }, (_, i) => `k${String(i).padStart(3, '0')}`);
        await write(
          store,
          keys.map((key) => [scope, key] as const),
          true,
        );
        const gone = new Set<string>();
        let round = 0;
        // Between pages, and while the next page is read: new keys everywhere, and deletes of keys far ahead.
        const churn = async () => {
          round++;
          const fresh = [`a${round}`, `k${round}5x`, `z${round}`].map((key) => [scope, key] as const);
          const doomed = keys[299 - round] as string;
          gone.add(doomed);
          await Promise.all([write(store, fresh), store.forget({ scope, key: doomed })]);
        };
        const racing: Promise<void>[] = [];
        const { refs } = await pagesOf(store, { scope, limit: 25 }, () => racing.push(churn()));
        await Promise.all(racing);
        expect(racing.length).toBeGreaterThan(5);
        expect(new Set(refs).size).toBe(refs.length);
        const listed = new Set(refs.map((ref) => (JSON.parse(ref) as [string, string])[1]));
        for (const key of keys) if (!gone.has(key)) expect(listed.has(key)).toBe(true);
      }),
    );

    test(
      'a cursor is a position: under another scope filter it stands before or after that whole scope',
      withOpened(async ({ store }) => {
        const base = `pos-${randomUUID()}`;
        await write(
          store,
          ['a', 'b', 'c'].flatMap((s) => ['1', '2', '3'].map((k) => [`${base}-${s}`, k] as const)),
        );
        const first = await store.list({ scope: `${base}-b`, limit: 1, nowMs: NOW_MS });
        const cursor = first.cursor as string;
        expect(decodeRecordCursor(cursor)).toEqual({ scope: `${base}-b`, key: '1' });
        const at = (scope: string) => pagesOf(store, { scope, limit: 10, cursor });
        expect((await at(`${base}-b`)).refs.length).toBe(2);
        expect((await at(`${base}-a`)).refs).toEqual([]);
        expect((await at(`${base}-c`)).refs.length).toBe(3);
      }),
    );

    test(
      'a cursor this store cannot have made is a RangeError; a scope it cannot hold is a limit',
      withOpened(async ({ store }) => {
        const cursorOf = (scope: string, key: string) =>
          Buffer.from(JSON.stringify(['k1', scope, key])).toString('base64url');
        for (const [scope, key] of [
          ['a\u0000', 'k'],
          ['a', '\ud800'],
          ['s'.repeat(256), 'k'],
        ] as const) {
          await expect(store.list({ limit: 5, nowMs: NOW_MS, cursor: cursorOf(scope, key) })).rejects.toThrow(
            RangeError,
          );
        }
        for (const scope of ['a\u0000', '\udc00', 's'.repeat(256)]) {
          await expect(store.list({ scope, limit: 5, nowMs: NOW_MS })).rejects.toThrow(IdemStoreLimitError);
          await expect(store.stats({ scope, nowMs: NOW_MS })).rejects.toThrow(IdemStoreLimitError);
          await expect(store.forget({ scope, key: 'k' })).rejects.toThrow(IdemStoreLimitError);
        }
      }),
    );

    test(
      'list, stats and forget are one statement each',
      withOpened(async (opened) => {
        const { store, client, sends } = opened;
        await write(store, [['one', 'k']], true);
        const spies = sends.map((method) => vi.spyOn(client as Record<string, () => unknown>, method));
        const count = async (call: () => Promise<unknown>) => {
          for (const spy of spies) spy.mockClear();
          await call();
          return spies.reduce((sum, spy) => sum + spy.mock.calls.length, 0);
        };
        try {
          // SQLite prepares a text once per connection, then only runs it: count the first call of each.
          expect(await count(async () => store.list({ limit: 10, nowMs: NOW_MS, bodies: true }))).toBe(1);
          expect(await count(async () => store.stats({ nowMs: NOW_MS }))).toBe(1);
          expect(await count(async () => store.stats({ scope: 'one', nowMs: NOW_MS }))).toBe(1);
          expect(await count(async () => store.forget({ scope: 'one', key: 'k' }))).toBe(1);
        } finally {
          for (const spy of spies) spy.mockRestore();
        }
      }),
    );

    test(
      'a page is one range read of the primary key, in its order, and reads a body only when asked for',
      withOpened(async (opened) => {
        const { dialect, table } = opened;
        await fill(opened, 5_000);
        const statements: [string, ListParams][] = [
          ['first page', { limit: 100, nowMs: NOW_MS }],
          ['after a cursor', { limit: 100, nowMs: NOW_MS, cursor: cursor('s12', 'k3') }],
          [
            'after a cursor, in flight',
            { limit: 100, nowMs: NOW_MS, state: 'in-flight', cursor: cursor('s12', 'k3') },
          ],
          ['a scope', { scope: 's12', limit: 10, nowMs: NOW_MS }],
          ['a scope after a cursor', { scope: 's12', limit: 10, nowMs: NOW_MS, cursor: cursor('s12', 'k3') }],
          ['a scope after another', { scope: 's12', limit: 10, nowMs: NOW_MS, cursor: cursor('s11', 'k3') }],
        ];
        for (const [what, params] of statements) {
          const after = params.cursor === undefined ? undefined : decodeRecordCursor(params.cursor);
          const statement = listStatement(DIALECTS[dialect], table, params, after);
          const plan = await planOf(opened, statement);
          const read = what === 'first page' ? INDEX_ORDER[dialect] : INDEX_RANGE[dialect];
          expect(plan, `${dialect}, ${what}: ${plan}`).toMatch(read);
          expect(plan, `${dialect}, ${what}: no sort of its own`).not.toMatch(/Sort|filesort|TEMP B-TREE/i);
          const text = render(dialect, statement);
          expect(text.replace(BODY_SIZE[dialect], ''), `${what}: no body read`).not.toMatch(/response_body/);
          const withBodies = render(
            dialect,
            listStatement(DIALECTS[dialect], table, { ...params, bodies: true }, after),
          );
          expect(withBodies.replace(BODY_SIZE[dialect], '')).toMatch(/response_body/);
        }
      }),
    );
  });
}

describe.runIf(await pgUp())('PostgreSQL with a linguistic collation on the key columns', () => {
  test('pages follow the collation, not the bytes: the database compares the cursor, each record once', async () => {
    const opened = await pgTable(2);
    try {
      const { db, table, store } = opened;
      // A table a host made under a database whose default collation is linguistic (en_US.UTF-8 and alike).
      await sqlRows(
        db,
        sql`ALTER TABLE ${id(table)}
          ALTER COLUMN ${id('scope')} TYPE varchar(255) COLLATE "en-US-x-icu",
          ALTER COLUMN ${id('idem_key')} TYPE varchar(255) COLLATE "en-US-x-icu"`,
      );
      const scopes = ['b', 'B', 'a', '_a', 'é', 'e'];
      await write(
        store,
        scopes.flatMap((scope) => AWKWARD.map((key) => [scope, key] as const)),
      );
      const everything = await orderedByDatabase(opened);
      const bytewise = [...everything].sort((x, y) => Buffer.compare(Buffer.from(x), Buffer.from(y)));
      expect(everything).not.toEqual(bytewise); // the collation does sort apart from the bytes
      for (const limit of [1, 4]) expect((await pagesOf(store, { limit })).refs).toEqual(everything);
      for (const scope of scopes) {
        const inScope = await orderedByDatabase(opened, scope);
        expect((await pagesOf(store, { scope, limit: 2 })).refs).toEqual(inScope);
      }
    } finally {
      await opened.drop();
    }
  });
});

const DIALECTS = { postgres, mysql, sqlite } as const;

const cursor = (scope: string, key: string) =>
  Buffer.from(JSON.stringify(['k1', scope, key])).toString('base64url');

const RENDERERS = { postgres: new PgDialect(), mysql: new MySqlDialect(), sqlite: new SQLiteSyncDialect() };
const render = (dialect: DialectName, statement: SQL) => RENDERERS[dialect].sqlToQuery(statement).sql;

/** The body's size, the one place a list without bodies may name the body column. */
const BODY_SIZE: Record<DialectName, RegExp> = {
  postgres: /octet_length\("response_body"\)/,
  mysql: /LENGTH\(`response_body`\)/,
  sqlite: /length\("response_body"\)/,
};

/** What each database's plan says for a range read of the primary key (a cursor's, a scope's). */
const INDEX_RANGE: Record<DialectName, RegExp> = {
  postgres: /Index Scan using \w+ on \w+[^\n]*\n\s+Index Cond: /,
  mysql: /^(range|ref) PRIMARY\b/,
  sqlite: /^SEARCH idem_records USING (COVERING )?INDEX sqlite_autoindex_idem_records_1 \(/,
};
/** And for the first page of everything: the primary key read in its order from the start. */
const INDEX_ORDER: Record<DialectName, RegExp> = {
  postgres: /Index Scan using \w+/,
  mysql: /^index PRIMARY\b/,
  sqlite: /^SCAN idem_records USING (COVERING )?INDEX sqlite_autoindex_idem_records_1\b/,
};

/** `count` in-flight records in 100 scopes, written by the database itself, then its statistics. */
async function fill({ dialect, db, table }: Opened, count: number): Promise<void> {
  const t = id(table);
  const row = (n: SQL) =>
    sql`SELECT ${concat(dialect, sql`'s'`, sql`${n} % 100`)}, ${concat(dialect, sql`'k'`, n)}, 'f', 'o', ${NOW_MS + 30_000},
      NULL, NULL, NULL, ${dialect === 'sqlite' ? sql`0` : sql`FALSE`}, ${NOW_MS}, ${NOW_MS}, ${NOW_MS + 60_000}`;
  if (dialect === 'postgres') {
    await sqlRows(db, sql`INSERT INTO ${t} ${row(sql`g`)} FROM generate_series(1, ${count}) AS g`);
    await sqlRows(db, sql`ANALYZE ${t}`);
    return;
  }
  // 1 … 10,000 from four digits: no recursion limit to raise, the same SQL on MySQL, MariaDB and SQLite.
  const digit = (name: string) =>
    sql.raw(
      `(SELECT 0 AS ${name} ${[1, 2, 3, 4, 5, 6, 7, 8, 9].map((d) => `UNION ALL SELECT ${d}`).join(' ')})`,
    );
  const numbers = sql`(SELECT 1 + a + 10 * b + 100 * c + 1000 * d AS g
    FROM ${digit('a')} AS da, ${digit('b')} AS db, ${digit('c')} AS dc, ${digit('d')} AS dd) AS n`;
  await sqlRows(db, sql`INSERT INTO ${t} ${row(sql`g`)} FROM ${numbers} WHERE g <= ${count}`);
  await sqlRows(db, dialect === 'mysql' ? sql`ANALYZE TABLE ${t}` : sql`ANALYZE`);
}

const concat = (dialect: DialectName, a: SQL, b: SQL) =>
  dialect === 'mysql' ? sql`CONCAT(${a}, ${b})` : sql`(${a} || CAST(${b} AS TEXT))`;

/** The database's plan for `statement`, as one string. */
async function planOf({ dialect, db }: Opened, statement: SQL): Promise<string> {
  const { sql: text, params } = RENDERERS[dialect].sqlToQuery(statement);
  if (dialect === 'postgres') {
    const rows = await sqlRows(db, sql.raw(`EXPLAIN ${inline(text, params, (i) => `$${i + 1}`)}`));
    return rows.map((r) => String(r['QUERY PLAN'])).join('\n');
  }
  if (dialect === 'mysql') {
    const rows = await sqlRows(db, sql.raw(`EXPLAIN ${inline(text, params, () => '?')}`));
    return rows.map((r) => `${r.type} ${r.key} ${r.Extra ?? ''}`).join('\n');
  }
  const rows = await sqlRows(db, sql.raw(`EXPLAIN QUERY PLAN ${inline(text, params, () => '?')}`));
  return rows.map((r) => String(r.detail)).join('\n');
}

/** A statement's text with its parameters written in as literals (numbers and plain strings only). */
function inline(text: string, params: unknown[], placeholder: (i: number) => string): string {
  const literal = (value: unknown) =>
    typeof value === 'number' ? String(value) : `'${String(value).replaceAll("'", "''")}'`;
  let out = text;
  // Highest index first, so that $1 does not eat the front of $12.
  for (let i = params.length - 1; i >= 0; i--) {
    const mark = placeholder(i);
    if (mark === '?') {
      const at = nthIndexOf(out, '?', i);
      out = `${out.slice(0, at)}${literal(params[i])}${out.slice(at + 1)}`;
    } else {
      out = out.replaceAll(mark, literal(params[i]));
    }
  }
  return out;
}

function nthIndexOf(text: string, needle: string, n: number): number {
  let at = -1;
  for (let i = 0; i <= n; i++) at = text.indexOf(needle, at + 1);
  return at;
}
