import { CliError, ExitCode } from './cli-error.js';

/** A store named by URL: which backend, where, and how to show it without its credentials. */
export type StoreUrl =
  | { readonly kind: 'postgres' | 'mysql'; readonly url: string; readonly shown: string }
  | { readonly kind: 'sqlite'; readonly file: string; readonly shown: string }
  | { readonly kind: 'redis'; readonly url: string; readonly shown: string }
  | {
      readonly kind: 'redis-cluster';
      readonly nodes: readonly { readonly host: string; readonly port: number }[];
      readonly username?: string;
      readonly password?: string;
      readonly tls: boolean;
      readonly shown: string;
    };

export const ACCEPTED =
  'postgres://, postgresql://, mysql://, sqlite:<file>, redis://, rediss:// or redis+cluster://host:port[,host:port…]';

const usage = (message: string) => new CliError(message, ExitCode.Usage);

/** The user name or password of a URL, percent-decoded: a `%` that starts no escape is the operator's mistake. */
function decoded(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    throw usage(
      'the store URL has a user name or password that is not percent-encoded (a "%" must be "%25")',
    );
  }
}

/** The URL with its password (and any `password=` query parameter) masked: what every message shows. */
function masked(url: URL): string {
  const copy = new URL(url.href);
  if (copy.password !== '') copy.password = '***';
  for (const name of [...copy.searchParams.keys()])
    if (/pass|secret|token|key/i.test(name)) copy.searchParams.set(name, '***');
  return copy.href;
}

function parseUrl(text: string, scheme: string): URL {
  let url: URL | undefined;
  try {
    url = new URL(text);
  } catch {}
  if (url === undefined || !text.slice(scheme.length + 1).startsWith('//') || url.hostname === '')
    throw usage(`the store URL is not a valid ${scheme}:// URL (it accepts ${ACCEPTED})`);
  return url;
}

/** `redis+cluster://[user:pass@]host:port[,host:port…]`: WHATWG URLs hold one host, so the list is split here. */
function clusterUrl(text: string): Extract<StoreUrl, { kind: 'redis-cluster' }> {
  const rest = text.slice(text.indexOf('://') + 3);
  const at = rest.lastIndexOf('@');
  const auth = at === -1 ? '' : rest.slice(0, at);
  const hosts = (at === -1 ? rest : rest.slice(at + 1)).replace(/[/?#].*$/s, '');
  const nodes = hosts.split(',').map((part) => {
    const match = /^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(?::(\d{1,5}))?$/.exec(part);
    const port = Number(match?.[2] ?? 6379);
    if (match === null || port < 1 || port > 65_535)
      throw usage(
        'the store URL names a cluster node that is not host:port (redis+cluster://host:port,host:port)',
      );
    return { host: (match[1] as string).replace(/^\[(.*)\]$/, '$1'), port };
  });
  const colon = auth.indexOf(':');
  const user = colon === -1 ? auth : auth.slice(0, colon);
  const pass = colon === -1 ? undefined : auth.slice(colon + 1);
  const shownAuth = auth === '' ? '' : `${user}${pass === undefined ? '' : ':***'}@`;
  return {
    kind: 'redis-cluster',
    nodes,
    ...(user === '' ? {} : { username: decoded(user) }),
    ...(pass === undefined ? {} : { password: decoded(pass) }),
    tls: false,
    shown: `redis+cluster://${shownAuth}${hosts}`,
  };
}

/**
 * Read a store URL: the forms of the reference server's settings (`postgres://…`, `postgresql://…`,
 * `mysql://…`, `sqlite:<file>`) and Redis (`redis://`, `rediss://`, `redis+cluster://`). Anything else is a
 * usage error whose message never quotes the URL, which may hold a password.
 */
export function parseStoreUrl(text: string): StoreUrl {
  const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(text)?.[1]?.toLowerCase();
  switch (scheme) {
    case 'sqlite':
    case 'file': {
      const file = text.slice(scheme.length + 1).replace(/^\/\/(?=\/)/, '');
      if (file === '') throw usage(`the store URL names no file (sqlite:<file>)`);
      if (file === ':memory:') throw usage('sqlite::memory: is a database of this process only: name a file');
      return { kind: 'sqlite', file, shown: `sqlite:${file}` };
    }
    case 'postgres':
    case 'postgresql':
    case 'mysql': {
      const url = parseUrl(text, scheme);
      if (url.pathname === '' || url.pathname === '/')
        throw usage(`the store URL names no database (${scheme}://host/<database>)`);
      return { kind: scheme === 'mysql' ? 'mysql' : 'postgres', url: url.href, shown: masked(url) };
    }
    case 'redis':
    case 'rediss': {
      const url = parseUrl(text, scheme);
      decoded(url.username);
      decoded(url.password);
      // ioredis reads the database from the path or a `db` parameter, and selects what parseInt makes of it (NaN
      // crashes it, `1.5` is 1); a SELECT the server refuses, it reports after connecting, on database 0.
      for (const db of [url.pathname.slice(1), ...url.searchParams.getAll('db')])
        if (!/^\d{0,5}$/.test(db))
          throw usage(
            'the store URL names a Redis database that is not a number (redis://host:port/<0, 1, …>)',
          );
      return { kind: 'redis', url: url.href, shown: masked(url) };
    }
    case 'redis+cluster':
    case 'rediss+cluster': {
      const parsed = clusterUrl(text);
      return scheme === 'rediss+cluster'
        ? { ...parsed, tls: true, shown: parsed.shown.replace(/^redis/, 'rediss') }
        : parsed;
    }
    default: {
      const given = scheme === undefined ? 'a URL without a scheme' : `a "${scheme}:" URL`;
      throw usage(`the store URL must be ${ACCEPTED}; got ${given}`);
    }
  }
}

/** The password of a URL's userinfo as typed: up to the authority's last `@` (a password may hold `@` and `/`). */
function passwordOf(text: string): string | undefined {
  const rest = /^[a-z][a-z0-9+.-]*:\/\/([^?#]*)/i.exec(text)?.[1];
  const at = rest?.lastIndexOf('@') ?? -1;
  const auth = rest?.slice(0, Math.max(at, 0)) ?? '';
  return at !== -1 && auth.includes(':') ? auth.slice(auth.indexOf(':') + 1) : undefined;
}

const SECRET_PARAM = /([?&][^=&#]*(?:pass|secret|token|key)[^=&#]*=)([^&#]*)/gi;

/** Every secret of a URL as it may appear in a message (raw and percent-decoded), longest first. */
export function secretsOf(text: string): string[] {
  const secrets = new Set<string>();
  const add = (value: string | undefined) => {
    if (value === undefined || value.length < 3) return;
    secrets.add(value);
    try {
      secrets.add(decodeURIComponent(value));
    } catch {}
  };
  add(passwordOf(text));
  for (const match of text.matchAll(SECRET_PARAM)) add(match[2]);
  return [...secrets].sort((a, b) => b.length - a.length);
}

/**
 * What masks the secrets of `texts` (the arguments, the environment's URL) in a message. A URL quoted whole (as
 * commander quotes an argument it refuses) is shown with its password and secret parameters masked, however
 * short they are; a password quoted alone (by a driver), wherever it is at least 3 characters long: a shorter
 * one would mask ordinary words.
 */
export function maskerOf(texts: readonly string[]): (text: string) => string {
  const whole: [string, string][] = [];
  for (const text of texts) {
    const password = passwordOf(text);
    const shown = (password === undefined ? text : text.replace(`:${password}@`, () => ':***@')).replace(
      SECRET_PARAM,
      '$1***',
    );
    if (shown !== text) whole.push([text, shown]);
  }
  whole.sort(([a], [b]) => b.length - a.length);
  const secrets = texts.flatMap(secretsOf).sort((a, b) => b.length - a.length);
  return (text) =>
    secrets.reduce(
      (masked, secret) => masked.replaceAll(secret, '***'),
      whole.reduce((masked, [raw, shown]) => masked.replaceAll(raw, shown), text),
    );
}
