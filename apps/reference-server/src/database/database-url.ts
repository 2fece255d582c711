import { resolve } from 'node:path';
import { quoted, SettingError } from '../setting-error.js';
import { databaseTarget } from './unreachable.js';

/** What a database URL setting accepts, as its messages say it. */
export const DATABASE_URL_FORMS =
  'sqlite:<file>, sqlite::memory:, postgres://user@host:port/database or mysql://user@host:port/database';

/** The lower-case scheme of a URL (`postgres` of `POSTGRES://…`), or undefined when it has none. */
export const schemeOf = (text: string): string | undefined =>
  /^([a-z][a-z0-9+.-]*):/i.exec(text)?.[1]?.toLowerCase();

/** Whether `scheme` names a database this server opens (database/open.ts). */
export const isDatabaseScheme = (scheme: string | undefined): boolean =>
  scheme === 'sqlite' ||
  scheme === 'file' ||
  scheme === 'postgres' ||
  scheme === 'postgresql' ||
  scheme === 'mysql';

/**
 * A database URL setting (`name`: DATABASE_URL, IDEMPOTENCY_STORE_URL): `sqlite:<file>` (`file:<file>` too,
 * `sqlite::memory:`), `postgres://…` / `postgresql://…` or `mysql://…`; anything else (another scheme, a bare
 * path, a URL that does not parse) is refused, never opened as a SQLite file of that name. The message never
 * quotes the URL: it may hold a password.
 */
export function databaseUrl(name: string, text: string): string {
  const scheme = schemeOf(text);
  if (scheme === 'sqlite' || scheme === 'file') {
    if (/^(sqlite|file):$/i.test(text))
      throw new SettingError(`${name} names no file; it accepts ${DATABASE_URL_FORMS}`);
    // Schemes are case-insensitive (RFC 3986); the database is opened by its lower-case scheme
    // (database/open.ts).
    return `${scheme}:${text.slice(scheme.length + 1)}`;
  }
  if (scheme === 'postgres' || scheme === 'postgresql' || scheme === 'mysql') {
    let url: URL | undefined;
    try {
      url = new URL(text);
    } catch {}
    if (url === undefined || !text.slice(scheme.length + 1).startsWith('//') || url.hostname === '')
      throw new SettingError(`${name} is not a valid ${scheme}:// URL; it accepts ${DATABASE_URL_FORMS}`);
    if (url.pathname === '' || url.pathname === '/')
      throw new SettingError(
        `${name} names no database (${scheme}://host/<database>); it accepts ${DATABASE_URL_FORMS}`,
      );
    return `${scheme}:${text.slice(scheme.length + 1)}`;
  }
  const given = scheme === undefined ? 'a URL without a scheme' : `a ${quoted(`${scheme}:`)} URL`;
  throw new SettingError(`${name} must be ${DATABASE_URL_FORMS}; got ${given}`);
}

/**
 * Whether two database URLs (as {@link databaseUrl} returns them) name one database: the same SQLite file (two
 * `sqlite::memory:` are two databases), or the same database on the same server, whoever logs in.
 */
export function sameDatabase(a: string, b: string): boolean {
  const [one, other] = [databaseTarget(a), databaseTarget(b)];
  if (one.kind !== other.kind) return false;
  if (one.kind === 'SQLite')
    return one.database !== ':memory:' && resolve(one.database) === resolve(other.database);
  return one.where.toLowerCase() === other.where.toLowerCase() && one.database === other.database;
}
