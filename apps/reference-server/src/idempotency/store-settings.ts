import {
  DATABASE_URL_FORMS,
  databaseUrl,
  isDatabaseScheme,
  sameDatabase,
  schemeOf,
} from '../database/database-url.js';
import { quoted, SettingError } from '../setting-error.js';

/** How a mutation's key is held against a second run (see the README's "Where the keys live"). */
export type Fence = 'transaction' | 'lease';

/** One Redis Cluster node to start from. */
export interface ClusterNode {
  readonly host: string;
  readonly port: number;
}

/** Where the idempotency records live: IDEMPOTENCY_STORE and IDEMPOTENCY_STORE_URL, resolved once. */
export type IdempotencyStoreConfig =
  /** The SQL store on the catalog's own database: the reservation commits with the mutation. */
  | { readonly kind: 'sql'; readonly database: 'catalog'; readonly fence: 'transaction' }
  /** The SQL store on a database of its own (a pool of `poolSize` for PostgreSQL and MySQL). */
  | {
      readonly kind: 'sql';
      readonly database: 'separate';
      readonly url: string;
      readonly poolSize: number;
      readonly fence: 'lease';
    }
  /** This process's memory: one node only. */
  | { readonly kind: 'memory'; readonly fence: 'lease' }
  /** Redis, standalone (`url`, as ioredis reads it) or a Cluster (its nodes and credentials). */
  | {
      readonly kind: 'redis';
      readonly connection:
        | { readonly mode: 'standalone'; readonly url: string }
        | {
            readonly mode: 'cluster';
            readonly nodes: readonly ClusterNode[];
            readonly username: string | undefined;
            readonly password: string | undefined;
          };
      /** Put before every record key (IDEMPOTENCY_STORE_PREFIX). */
      readonly prefix: string;
      readonly fence: 'lease';
    };

export const STORE_KINDS = ['sql', 'memory', 'redis'] as const;

/** The record key prefix on Redis when IDEMPOTENCY_STORE_PREFIX is not set. */
export const DEFAULT_REDIS_PREFIX = 'idem:catalog:';

const REDIS_FORMS =
  'redis://[user:password@]host:port[/db], rediss://… (TLS) or redis+cluster://host:port[,host:port…]';
/** More seed nodes than any cluster needs: a longer list is a mistake (or an attack on the start-up). */
const MAX_CLUSTER_NODES = 64;

/** A redis:// or rediss:// URL, checked as far as ioredis would read it; the message never quotes it. */
function standaloneUrl(text: string, scheme: string): string {
  let url: URL | undefined;
  try {
    url = new URL(text);
  } catch {}
  if (url === undefined || !text.slice(scheme.length + 1).startsWith('//') || url.hostname === '')
    throw new SettingError(
      `IDEMPOTENCY_STORE_URL is not a valid ${scheme}:// URL; it accepts ${REDIS_FORMS}`,
    );
  if (!/^(\/\d{0,5})?$/.test(url.pathname))
    throw new SettingError(
      `IDEMPOTENCY_STORE_URL may name a Redis database only by its number (${scheme}://host:port/0); it accepts ${REDIS_FORMS}`,
    );
  if (url.search !== '' || url.hash !== '')
    throw new SettingError(`IDEMPOTENCY_STORE_URL must have no query or fragment; it accepts ${REDIS_FORMS}`);
  return text;
}

/**
 * `redis+cluster://[user[:password]@]host:port[,host:port…][/]`: the nodes to discover the cluster from. Parsed by
 * hand (a WHATWG URL has one host); the message never quotes any of it.
 */
function clusterConnection(text: string) {
  const refuse = (why: string) =>
    new SettingError(`IDEMPOTENCY_STORE_URL ${why}; a cluster is redis+cluster://host:port[,host:port…]`);
  let rest = text.slice('redis+cluster:'.length);
  if (!rest.startsWith('//')) throw refuse('is not a valid redis+cluster:// URL');
  rest = rest.slice(2).replace(/\/$/, '');
  let username: string | undefined;
  let password: string | undefined;
  const at = rest.lastIndexOf('@');
  if (at !== -1) {
    const credentials = rest.slice(0, at);
    rest = rest.slice(at + 1);
    const colon = credentials.indexOf(':');
    try {
      username = decodeURIComponent(colon === -1 ? credentials : credentials.slice(0, colon)) || undefined;
      password = colon === -1 ? undefined : decodeURIComponent(credentials.slice(colon + 1));
    } catch {
      throw refuse('has credentials that are not percent-encoded properly');
    }
  }
  if (/[/?#]/.test(rest))
    throw refuse('must name nodes only (no database, path or query: a cluster has one database)');
  const parts = rest.split(',');
  if (parts.length > MAX_CLUSTER_NODES) throw refuse(`names more than ${MAX_CLUSTER_NODES} nodes`);
  const nodes = parts.map((part) => {
    const match = /^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]{1,253}):(\d{1,5})$/.exec(part);
    const port = Number(match?.[2]);
    if (match === null || !(port >= 1 && port <= 65_535)) throw refuse('has a node that is not host:port');
    return { host: (match[1] as string).replace(/^\[(.*)\]$/, '$1'), port };
  });
  return { mode: 'cluster' as const, nodes, username, password };
}

function prefixOf(text: string | undefined): string {
  if (text === undefined || text === '') return DEFAULT_REDIS_PREFIX;
  // A brace would become every record's Cluster hash tag, all of them in one slot (@idem/store-redis refuses it).
  if (!/^[\x21-\x7e]{1,200}$/.test(text) || /[{}]/.test(text))
    throw new SettingError(
      `IDEMPOTENCY_STORE_PREFIX must be 1 to 200 visible ASCII characters without { or }, got ${quoted(text)}`,
    );
  return text;
}

/** The kind of URL `scheme` is, for a message: never the URL itself. */
const kindOfUrl = (scheme: string | undefined) =>
  scheme === undefined ? 'a URL without a scheme' : `a ${quoted(`${scheme}:`)} URL`;

/**
 * Read IDEMPOTENCY_STORE, IDEMPOTENCY_STORE_URL, IDEMPOTENCY_POOL_SIZE and IDEMPOTENCY_STORE_PREFIX. A
 * combination that means nothing (a URL for the memory store, Redis without a URL, a Redis URL for the SQL
 * store, the catalog's own database named again) is refused with one line that never quotes the URL.
 */
export function idempotencyStoreSettings(
  env: Record<string, string | undefined>,
  resolved: { readonly databaseUrl: string; readonly poolSize: number },
): IdempotencyStoreConfig {
  const kind = env.IDEMPOTENCY_STORE || 'sql';
  if (!(STORE_KINDS as readonly string[]).includes(kind))
    throw new SettingError(`IDEMPOTENCY_STORE must be one of ${STORE_KINDS.join(', ')}, got ${quoted(kind)}`);
  const text = env.IDEMPOTENCY_STORE_URL || undefined;
  // Refused whole: a URL parser drops tabs and newlines silently, and a client library might read them otherwise.
  if (text !== undefined && /[\s\p{Cc}]/u.test(text))
    throw new SettingError('IDEMPOTENCY_STORE_URL must not hold spaces or control characters');
  const scheme = text === undefined ? undefined : schemeOf(text);
  const separateSql = kind === 'sql' && text !== undefined;
  if (env.IDEMPOTENCY_POOL_SIZE && !separateSql)
    throw new SettingError(
      'IDEMPOTENCY_POOL_SIZE is the pool of a separate SQL store database: it needs IDEMPOTENCY_STORE=sql and an IDEMPOTENCY_STORE_URL',
    );
  if (env.IDEMPOTENCY_STORE_PREFIX && kind !== 'redis')
    throw new SettingError(
      "IDEMPOTENCY_STORE_PREFIX is the Redis store's key prefix: it needs IDEMPOTENCY_STORE=redis",
    );
  switch (kind) {
    case 'memory':
      if (text !== undefined)
        throw new SettingError(
          'IDEMPOTENCY_STORE_URL cannot be used with IDEMPOTENCY_STORE=memory (records stay in this process); leave it unset, or choose sql or redis',
        );
      return { kind: 'memory', fence: 'lease' };
    case 'redis': {
      if (text === undefined)
        throw new SettingError(`IDEMPOTENCY_STORE=redis needs IDEMPOTENCY_STORE_URL: ${REDIS_FORMS}`);
      const prefix = prefixOf(env.IDEMPOTENCY_STORE_PREFIX);
      if (scheme === 'redis' || scheme === 'rediss')
        return {
          kind: 'redis',
          connection: {
            mode: 'standalone',
            url: standaloneUrl(`${scheme}:${text.slice(scheme.length + 1)}`, scheme),
          },
          prefix,
          fence: 'lease',
        };
      if (scheme === 'redis+cluster')
        return {
          kind: 'redis',
          connection: clusterConnection(`${scheme}:${text.slice(scheme.length + 1)}`),
          prefix,
          fence: 'lease',
        };
      const hint = isDatabaseScheme(scheme) ? ' (a database URL is for IDEMPOTENCY_STORE=sql)' : '';
      throw new SettingError(
        `IDEMPOTENCY_STORE_URL must be ${REDIS_FORMS} with IDEMPOTENCY_STORE=redis; got ${kindOfUrl(scheme)}${hint}`,
      );
    }
    default: {
      if (text === undefined) return { kind: 'sql', database: 'catalog', fence: 'transaction' };
      if (scheme === 'redis' || scheme === 'rediss' || scheme === 'redis+cluster')
        throw new SettingError(
          `IDEMPOTENCY_STORE_URL is a Redis URL, but IDEMPOTENCY_STORE is sql${env.IDEMPOTENCY_STORE ? '' : ' (the default)'}: set IDEMPOTENCY_STORE=redis, or give ${DATABASE_URL_FORMS}`,
        );
      const url = databaseUrl('IDEMPOTENCY_STORE_URL', text);
      if (sameDatabase(url, resolved.databaseUrl))
        throw new SettingError(
          "IDEMPOTENCY_STORE_URL names the catalog's own database: leave it unset, and the store commits each key with its mutation",
        );
      return { kind: 'sql', database: 'separate', url, poolSize: resolved.poolSize, fence: 'lease' };
    }
  }
}
