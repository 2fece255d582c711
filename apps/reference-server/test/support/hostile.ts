// The hostile-input suite's data: the catalog's routes with a valid request each, and the classes of hostile
// values, with where each is put into a request.
import { schema } from './server.js';

export interface Route {
  readonly method: string;
  /** Without a catalog prefix; `{ns}`, `{table}` and `{view}` are filled in. */
  readonly path: string;
  /** A valid body (JSON), for the routes that take one. */
  readonly body?: unknown;
}

/** What exists before every case: namespace `hns` with table `t` and view `v`. */
export const EXISTING = { ns: 'hns', table: 't', view: 'v' } as const;

export const view = {
  name: 'fresh',
  schema: { type: 'struct', 'schema-id': 0, fields: [{ id: 1, name: 'n', required: false, type: 'long' }] },
  'view-version': {
    'version-id': 1,
    'timestamp-ms': 1,
    'schema-id': 0,
    summary: {},
    representations: [{ type: 'sql', sql: 'SELECT 1 AS n', dialect: 'spark' }],
    'default-namespace': ['hns'],
  },
  properties: {},
};

const id = (name: string) => ({ namespace: ['hns'], name });

/** Every operation the catalog serves, with a valid request; metadata locations are filled in by the suite. */
export function routes(metadata: { table: string; view: string }): Route[] {
  return [
    { method: 'GET', path: '/v1/namespaces' },
    { method: 'POST', path: '/v1/namespaces', body: { namespace: ['fresh'] } },
    { method: 'GET', path: '/v1/namespaces/{ns}' },
    { method: 'HEAD', path: '/v1/namespaces/{ns}' },
    { method: 'DELETE', path: '/v1/namespaces/{ns}' },
    { method: 'POST', path: '/v1/namespaces/{ns}/properties', body: { updates: { a: 'b' }, removals: [] } },
    { method: 'GET', path: '/v1/namespaces/{ns}/tables' },
    { method: 'POST', path: '/v1/namespaces/{ns}/tables', body: { name: 'fresh', schema } },
    { method: 'GET', path: '/v1/namespaces/{ns}/tables/{table}' },
    { method: 'HEAD', path: '/v1/namespaces/{ns}/tables/{table}' },
    { method: 'POST', path: '/v1/namespaces/{ns}/tables/{table}', body: { requirements: [], updates: [] } },
    { method: 'DELETE', path: '/v1/namespaces/{ns}/tables/{table}' },
    {
      method: 'POST',
      path: '/v1/namespaces/{ns}/register',
      body: { name: 'fresh', 'metadata-location': metadata.table },
    },
    { method: 'POST', path: '/v1/namespaces/{ns}/tables/{table}/unregister' },
    {
      method: 'POST',
      path: '/v1/namespaces/{ns}/tables/{table}/metrics',
      body: {
        'report-type': 'commit-report',
        'table-name': 'hns.t',
        'snapshot-id': 1,
        'sequence-number': 1,
        operation: 'append',
        metrics: {},
      },
    },
    { method: 'POST', path: '/v1/tables/rename', body: { source: id('t'), destination: id('t2') } },
    {
      method: 'POST',
      path: '/v1/transactions/commit',
      body: { 'table-changes': [{ identifier: id('t'), requirements: [], updates: [] }] },
    },
    { method: 'GET', path: '/v1/namespaces/{ns}/views' },
    { method: 'POST', path: '/v1/namespaces/{ns}/views', body: view },
    { method: 'GET', path: '/v1/namespaces/{ns}/views/{view}' },
    { method: 'HEAD', path: '/v1/namespaces/{ns}/views/{view}' },
    { method: 'POST', path: '/v1/namespaces/{ns}/views/{view}', body: { updates: [] } },
    { method: 'DELETE', path: '/v1/namespaces/{ns}/views/{view}' },
    { method: 'POST', path: '/v1/views/rename', body: { source: id('v'), destination: id('v2') } },
    {
      method: 'POST',
      path: '/v1/namespaces/{ns}/register-view',
      body: { name: 'fresh', 'metadata-location': metadata.view },
    },
  ];
}

const long = (n: number) => 'x'.repeat(n);

/** Path segments as they appear in the URL (percent-encoded). */
export const SEGMENTS: Record<string, string> = {
  NUL: 'a%00b',
  'only NUL': '%00',
  'a C0 control (SOH)': 'a%01b',
  'a separator at the start': '%1Fa',
  'a separator at the end': 'a%1F',
  'a doubled separator': 'a%1F%1Fb',
  DEL: 'a%7Fb',
  'a C1 control (NEL)': 'a%C2%85b',
  '300 characters': long(300),
  '10k characters': long(10_000),
  'a bad escape (%ZZ)': 'a%ZZb',
  'a truncated escape': 'a%E0%A4%A',
  'invalid UTF-8': 'a%C3%28b',
  'an encoded lone surrogate': 'a%ED%A0%80b',
  'an encoded slash': 'a%2Fb',
  'an encoded backslash': 'a%5Cb',
};

/** Slashes are allowed in a prefix: it names no file. */
export const PREFIX_SEGMENTS = Object.fromEntries(
  Object.entries(SEGMENTS).filter(([name]) => !/slash/.test(name)),
);

/** Names (table, view, namespace level), as JSON values. */
export const NAMES: Record<string, unknown> = {
  NUL: 'a\u0000b',
  'a C0 control': 'a\u0001b',
  'the separator U+001F': 'a\u001fb',
  DEL: 'a\u007fb',
  'a C1 control': 'a\u0085b',
  'a lone surrogate': 'a\ud800b',
  empty: '',
  '"."': '.',
  '".."': '..',
  'a slash': 'a/b',
  'a backslash': 'a\\b',
  '300 characters': long(300),
  '256 bytes of UTF-8': 'é'.repeat(128),
  '10k characters': long(10_000),
  'a number': 5,
  null: null,
  'an object': {},
  'an array': [],
};

/** Where a name goes in a request: route (method and path) and the body carrying it. */
export const NAME_PLACES: Record<string, { method: string; path: string; body: (name: unknown) => unknown }> =
  {
    'a namespace level': { method: 'POST', path: '/v1/namespaces', body: (n) => ({ namespace: ['ok', n] }) },
    'a table name': { method: 'POST', path: '/v1/namespaces/hns/tables', body: (n) => ({ name: n, schema }) },
    'a view name': { method: 'POST', path: '/v1/namespaces/hns/views', body: (n) => ({ ...view, name: n }) },
    'a registered name': {
      method: 'POST',
      path: '/v1/namespaces/hns/register',
      body: (n) => ({ name: n, 'metadata-location': '/nowhere.json' }),
    },
    'a rename destination': {
      method: 'POST',
      path: '/v1/tables/rename',
      body: (n) => ({ source: id('t'), destination: { namespace: ['hns'], name: n } }),
    },
    'a view rename namespace': {
      method: 'POST',
      path: '/v1/views/rename',
      body: (n) => ({ source: id('v'), destination: { namespace: [n], name: 'v' } }),
    },
    'a transaction identifier': {
      method: 'POST',
      path: '/v1/transactions/commit',
      body: (n) => ({
        'table-changes': [{ identifier: { namespace: ['hns'], name: n }, requirements: [], updates: [] }],
      }),
    },
  };

/** Numbers as raw JSON text (JSON.stringify could not write most of them) that no integer field takes. */
export const NUMBERS: Record<string, string> = {
  '1e400 (beyond a double)': '1e400',
  '-1e400': '-1e400',
  '2^63 (one past int64)': '9223372036854775808',
  '-2^63 - 1 (one below int64)': '-9223372036854775809',
  '12345678901234567890 (past int64)': '12345678901234567890',
  '1e19 (past int64, as an exponent)': '1e19',
  'a 300-digit integer (a double, past int64)': `1${'0'.repeat(299)}`,
  'a fraction': '1.5',
  'a fraction that a double rounds to an integer past 2^53': '5938174936372637279.5',
  'a numeric string': '"7"',
  'a big numeric string': '"5938174936372637279"',
  'a boolean': 'true',
  'an array': '[1]',
};

/** Integers that an int64 field takes exactly and an int32 field refuses. */
export const WIDE_INTEGERS: Record<string, string> = {
  '2^31 (one past int32)': '2147483648',
  '2^53 (not exact as a double)': '9007199254740992',
  '2^63 - 1 (int64 max)': '9223372036854775807',
  '-2^63 (int64 min)': '-9223372036854775808',
  '1e18 (an exponent)': '1e18',
};

/**
 * Numeric fields of request bodies; `@N@` is replaced by the raw number. An `int64` field answers `accepts` to a
 * wide integer (the catalog goes on with the request); any other is an int32.
 */
export const NUMBER_PLACES: Record<string, { path: string; raw: string; int64?: { accepts: number } }> = {
  'a snapshot id': {
    path: '/v1/namespaces/hns/tables/t',
    raw: '{"requirements":[],"updates":[{"action":"add-snapshot","snapshot":{"snapshot-id":@N@,"timestamp-ms":1,"manifest-list":"m","summary":{"operation":"append"}}}]}',
    int64: { accepts: 200 },
  },
  'a snapshot id to remove': {
    path: '/v1/namespaces/hns/tables/t',
    raw: '{"requirements":[],"updates":[{"action":"remove-snapshots","snapshot-ids":[1,@N@]}]}',
    int64: { accepts: 200 },
  },
  'a metrics report snapshot id': {
    path: '/v1/namespaces/hns/tables/t/metrics',
    raw: '{"report-type":"commit-report","table-name":"hns.t","snapshot-id":@N@,"sequence-number":1,"operation":"append","metrics":{}}',
    int64: { accepts: 204 },
  },
  'a schema id': {
    path: '/v1/namespaces/hns/tables/t',
    raw: '{"requirements":[],"updates":[{"action":"set-current-schema","schema-id":@N@}]}',
  },
  'a format-version': {
    path: '/v1/namespaces/hns/tables/t',
    raw: '{"requirements":[],"updates":[{"action":"upgrade-format-version","format-version":@N@}]}',
  },
  'an asserted schema id': {
    path: '/v1/namespaces/hns/tables/t',
    raw: '{"requirements":[{"type":"assert-current-schema-id","current-schema-id":@N@}],"updates":[]}',
  },
  'a field id of a new table': {
    path: '/v1/namespaces/hns/tables',
    raw: '{"name":"fresh","schema":{"type":"struct","fields":[{"id":@N@,"name":"a","required":true,"type":"long"}]}}',
  },
  'a view version id': {
    path: '/v1/namespaces/hns/views/v',
    raw: `{"updates":[{"action":"set-current-view-version","view-version-id":@N@}]}`,
  },
  'a transaction snapshot id': {
    path: '/v1/transactions/commit',
    raw: '{"table-changes":[{"identifier":{"namespace":["hns"],"name":"t"},"requirements":[{"type":"assert-ref-snapshot-id","ref":"main","snapshot-id":@N@}],"updates":[]}]}',
    // Table t has no main branch: the requirement fails, exactly.
    int64: { accepts: 409 },
  },
};

/** Whole bodies: raw bytes and their content type. */
export const BODIES: Record<string, { raw: string | Buffer; type?: string }> = {
  empty: { raw: '' },
  'invalid JSON': { raw: '{"namespace": [' },
  'invalid UTF-8': { raw: Buffer.from([0x7b, 0x22, 0x6e, 0x22, 0x3a, 0x22, 0xc3, 0x28, 0x22, 0x7d]) },
  'UTF-16': { raw: Buffer.from('\ufeff{"namespace":["u"]}', 'utf16le') },
  'an array': { raw: '[]' },
  'a string': { raw: '"x"' },
  'a number': { raw: '5' },
  null: { raw: 'null' },
  'nested 10k deep': { raw: `{"a":${'['.repeat(10_000)}${']'.repeat(10_000)}}` },
  'over the 1 MiB limit': { raw: `{"pad":"${long(1024 * 1024)}"}` },
  'a __proto__ key': { raw: '{"namespace":["p"],"properties":{"__proto__":{"polluted":"yes"}}}' },
  'a constructor.prototype key': { raw: '{"constructor":{"prototype":{"polluted":"yes"}}}' },
  'text/plain': { raw: '{}', type: 'text/plain' },
  'application/xml': { raw: '<a/>', type: 'application/xml' },
  'a form': { raw: 'a=b', type: 'application/x-www-form-urlencoded' },
};

/** Hostile locations; `warehouse` and `outside` are the suite's directories. */
export function locations(warehouse: string, outside: string): Record<string, string> {
  return {
    'a directory outside': outside,
    '/etc/passwd': '/etc/passwd',
    'a ../ escape': `${warehouse}/hns/../../${outside.split('/').pop()}/x`,
    'an escape in a file: URL': `file://${warehouse}/%2e%2e/x`,
    'file:///': 'file:///',
    '/proc/self': 'file:///proc/self/status',
    'a file: URL with a host': `file://example.com${warehouse}/x`,
    's3://': 's3://bucket/x',
    'a Windows path': 'C:\\warehouse\\x',
    'a relative path': 'hns/x',
    '3000 characters': `/${long(3000)}`,
    'NUL after decoding': `file://${warehouse}/a%00b`,
    'the warehouse itself': `${warehouse}/`,
    'a symlink out of the warehouse': `${warehouse}/link-out/x`,
  };
}

/** Where a location goes; `@L@` is replaced by it (JSON-encoded). */
export const LOCATION_PLACES: Record<string, { path: string; body: (location: string) => unknown }> = {
  'a new table': { path: '/v1/namespaces/hns/tables', body: (l) => ({ name: 'fresh', schema, location: l }) },
  'a new view': { path: '/v1/namespaces/hns/views', body: (l) => ({ ...view, location: l }) },
  register: { path: '/v1/namespaces/hns/register', body: (l) => ({ name: 'fresh', 'metadata-location': l }) },
  'register-view': {
    path: '/v1/namespaces/hns/register-view',
    body: (l) => ({ name: 'fresh', 'metadata-location': l }),
  },
  'a table commit': {
    path: '/v1/namespaces/hns/tables/t',
    body: (l) => ({ requirements: [], updates: [{ action: 'set-location', location: l }] }),
  },
  'a view commit': {
    path: '/v1/namespaces/hns/views/v',
    body: (l) => ({ updates: [{ action: 'set-location', location: l }] }),
  },
  'a transaction': {
    path: '/v1/transactions/commit',
    body: (l) => ({
      'table-changes': [
        { identifier: id('t'), requirements: [], updates: [{ action: 'set-location', location: l }] },
      ],
    }),
  },
};
